// The Vercel AI SDK with its OpenAI provider, once through the Responses API (the provider's
// default) and once through Chat Completions.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node ai-sdk.mjs
import { createOpenAI } from '@ai-sdk/openai';
import { streamText } from 'ai';

const provider = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
const model = process.env.MODEL ?? 'gpt-4o-mini';

for (const [name, languageModel] of [
  ['responses', provider.responses(model)],
  ['chat', provider.chat(model)],
]) {
  const result = streamText({ model: languageModel, prompt: 'Say hello to modelgate.', maxRetries: 0 });
  process.stdout.write(`[${name}] `);
  for await (const text of result.textStream) process.stdout.write(text);
  const usage = await result.usage;
  console.log(`\n[${name}] ${usage.inputTokens} in, ${usage.outputTokens} out`);
}
