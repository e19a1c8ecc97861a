// The OpenAI Agents SDK with a client pointed at modelgate. Tracing export is turned off:
// it would send traces to OpenAI, not through modelgate.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node agents.mjs
import OpenAI from 'openai';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';

setDefaultOpenAIClient(new OpenAI());
setTracingDisabled(true);

const agent = new Agent({
  name: 'Greeter',
  instructions: 'You greet people briefly.',
  model: process.env.MODEL ?? 'gpt-4o-mini',
});
const result = await run(agent, 'Say hello to modelgate.', { stream: true });
for await (const text of result.toTextStream()) process.stdout.write(text);
await result.completed;
console.log(`\n[final] ${result.finalOutput}`);
