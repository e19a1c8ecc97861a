// The official @anthropic-ai/sdk on modelgate's /v1/messages route.
//   ANTHROPIC_BASE_URL=http://127.0.0.1:8080 ANTHROPIC_API_KEY=sim-SEARCH_APP_KEY node anthropic.mjs
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic(); // reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY
const stream = client.messages.stream({
  model: process.env.MODEL ?? 'gpt-4o-mini',
  max_tokens: 256,
  messages: [{ role: 'user', content: 'Say hello to modelgate.' }],
});
stream.on('text', (text) => process.stdout.write(text));
const message = await stream.finalMessage();
console.log(`\n[${message.stop_reason}] ${message.usage.input_tokens} in, ${message.usage.output_tokens} out`);
