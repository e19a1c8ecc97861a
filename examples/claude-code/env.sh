# Claude-style coding agents (Claude Code and others built on Anthropic's SDKs) read these.
# Source this file, then start the agent:   . examples/claude-code/env.sh && claude
export ANTHROPIC_BASE_URL=http://127.0.0.1:8080   # modelgate serves /v1/messages here
export ANTHROPIC_AUTH_TOKEN=sim-SEARCH_APP_KEY    # your modelgate key (sent as a bearer token)
export ANTHROPIC_MODEL=gpt-4o-mini                # a model your key may use (GET /v1/models)
export ANTHROPIC_SMALL_FAST_MODEL=gpt-4o-mini     # the agent's helper calls use it too
