// The official openai package on Chat Completions: a streamed answer, printed as it arrives.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node openai-chat.mjs
import OpenAI from 'openai';

const client = new OpenAI(); // reads OPENAI_BASE_URL and OPENAI_API_KEY
const stream = await client.chat.completions.create({
  model: process.env.MODEL ?? 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'Say hello to modelgate.' }],
  stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? '');
  if (chunk.usage) console.log(`\n[usage] ${chunk.usage.prompt_tokens} in, ${chunk.usage.completion_tokens} out`);
}
