# The Gemini CLI (and @google/genai) read these. Source this file, copy settings.json into
# ~/.gemini/settings.json, then start the CLI:   . examples/gemini/env.sh && gemini
export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080   # modelgate serves /v1beta/models/... here
export GEMINI_API_KEY=sim-SEARCH_APP_KEY              # your modelgate key (sent as x-goog-api-key)
