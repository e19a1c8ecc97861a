// The official openai package on the Responses API, which modelgate passes straight through.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node openai-responses.mjs
import OpenAI from 'openai';

const client = new OpenAI();
const stream = client.responses.stream({
  model: process.env.MODEL ?? 'gpt-4o-mini',
  input: 'Say hello to modelgate.',
});
stream.on('response.output_text.delta', (e) => process.stdout.write(e.delta));
const final = await stream.finalResponse();
console.log(`\n[${final.status}] ${final.usage?.input_tokens} in, ${final.usage?.output_tokens} out`);
