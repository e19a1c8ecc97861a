// Two conversations side by side on one Responses WebSocket: lanes (stream_id), with the
// official openai package's ResponsesWebSocketSession. Each lane's turns run in order; lanes
// run at once (up to limits.websocket_lanes per connection, default 4), and every event
// carries its lane's stream_id, which the session uses to route it.
//   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=sim-SEARCH_APP_KEY node responses-websocket-lanes.mjs
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { ResponsesWebSocketSession } from 'openai/lib/responses/responses-websocket-session';

const model = process.env.MODEL ?? 'gpt-4o-mini';
const ws = new ResponsesWS(new OpenAI());
ws.on('error', () => {}); // error events reach their lane's finalResponse() as a rejection
// A lane sends on the open socket only.
if (ws.socket.readyState !== 1) await new Promise((resolve) => ws.socket.on('open', resolve));
const session = new ResponsesWebSocketSession(ws, { maxLanes: 4, maxBufferedEvents: 10_000, maxBufferedBytes: 16 << 20 });

async function conversation(name, prompts) {
  const lane = session.lane(name);
  let previous;
  for (const input of prompts) {
    // Only the new input and previous_response_id go over the wire, as on the default lane.
    lane.create({ model, store: false, input, ...(previous && { previous_response_id: previous.id }) });
    previous = await lane.finalResponse();
    console.log(`[${name}] [${previous.status}] ${previous.output_text}`);
  }
}

// While a lane's response streams, `ws.send({ type: 'response.steer', previous_response_id,
// input })` steers it: it ends incomplete (reason steered) and a successor with the new input
// follows on the same lane (docs/routes.md).
try {
  await Promise.all([
    conversation('research', ['Say hello to modelgate.', 'And once more, on the same lane.']),
    conversation('summary', ['Say hello from the second lane.']),
  ]);
} catch (err) {
  console.error(`[error] ${err.error?.status ?? ''} ${err.error?.error?.code ?? ''}: ${err.message}`);
  process.exitCode = 1;
} finally {
  session.close();
  ws.close();
}
