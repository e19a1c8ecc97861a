// LangChain JS's ChatOpenAI pointed at modelgate.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node langchain.mjs
import { ChatOpenAI } from '@langchain/openai';

const llm = new ChatOpenAI({
  model: process.env.MODEL ?? 'gpt-4o-mini',
  apiKey: process.env.OPENAI_API_KEY,
  configuration: { baseURL: process.env.OPENAI_BASE_URL },
  maxRetries: 0,
});
for await (const chunk of await llm.stream('Say hello to modelgate.')) process.stdout.write(String(chunk.content));
console.log();
