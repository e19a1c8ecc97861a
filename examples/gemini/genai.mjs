// The official @google/genai SDK on modelgate's Gemini routes: a streamed answer, then a count.
//   GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080 GEMINI_API_KEY=sim-SEARCH_APP_KEY node genai.mjs
import { GoogleGenAI } from '@google/genai';

// Reads GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL. The SDK calls /v1 by default; modelgate
// serves /v1beta too (httpOptions: { apiVersion: 'v1beta' }, what the Gemini CLI uses).
const ai = new GoogleGenAI({});
const model = process.env.MODEL ?? 'gpt-4o-mini';
const contents = 'Say hello to modelgate.';

const stream = await ai.models.generateContentStream({ model, contents });
let last;
for await (const chunk of stream) {
  process.stdout.write(chunk.text ?? '');
  last = chunk;
}
const usage = last.usageMetadata;
console.log(`\n[${last.candidates[0].finishReason}] ${usage.promptTokenCount} in, ${usage.candidatesTokenCount} out`);

const { totalTokens } = await ai.models.countTokens({ model, contents });
console.log(`[countTokens] ${totalTokens}`);
