// The Responses API over one WebSocket (the official openai package's ResponsesWS, which
// needs the `ws` package): each turn sends only its new input and previous_response_id, and
// modelgate keeps the conversation on the connection, even with store: false.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node responses-websocket.mjs
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';

const model = process.env.MODEL ?? 'gpt-4o-mini';
const ws = new ResponsesWS(new OpenAI()); // ws://…/v1/responses, with the key as a Bearer header

// One turn at a time: the next response.create is sent once this one has ended.
let turnEnded;
ws.on('response.output_text.delta', (e) => process.stdout.write(e.delta));
ws.on('response.completed', (e) => turnEnded.resolve(e.response));
ws.on('response.incomplete', (e) => turnEnded.resolve(e.response));
ws.on('response.failed', (e) => turnEnded.reject(new Error(e.response.error?.message ?? 'response failed')));
// A refused turn (a limit, a model the key may not use) is an `error` event; the connection
// stays open. Without this listener the SDK would raise it as an unhandled rejection.
ws.on('error', (err) => turnEnded?.reject(err));

function turn(body) {
  return new Promise((resolve, reject) => {
    turnEnded = { resolve, reject };
    ws.send({ type: 'response.create', model, store: false, ...body });
  });
}

try {
  const first = await turn({ input: 'Say hello to modelgate.' });
  console.log(`\n[${first.status}] ${first.usage?.input_tokens} in, ${first.usage?.output_tokens} out`);

  // Only the new message goes over the wire; modelgate sends the platform the whole conversation.
  const second = await turn({ previous_response_id: first.id, input: [{ role: 'user', content: 'And once more, on the same connection.' }] });
  console.log(`\n[${second.status}] ${second.usage?.input_tokens} in, ${second.usage?.output_tokens} out`);
} catch (err) {
  // err.error is the error event: its HTTP status and OpenAI's error object.
  console.error(`[error] ${err.error?.status ?? ''} ${err.error?.error?.code ?? ''}: ${err.message}`);
  process.exitCode = 1;
} finally {
  ws.close();
}
