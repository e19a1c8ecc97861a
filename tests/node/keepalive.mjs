// Keep-alives seen through the official openai npm client: run by the Go test
// TestKeepAliveThroughIdleCuttingProxy (not by TestNodeClient, whose gateway has no pausing
// platform or idle-cutting proxy in front). The platform pauses the first chat and the first
// Responses stream for MODELGATE_THINK_MS; the streams after them do not pause, and the
// client must see the same events in both.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { client, simAnswer } from './client.mjs';

const openai = client();
const thinkMs = Number(process.env.MODELGATE_THINK_MS ?? 0);

async function chatEvents() {
  const stream = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'think first' }],
    stream: true,
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function responsesEvents() {
  const stream = await openai.responses.create({ model: 'gpt-4o-mini', input: 'think first', stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}

test('a paused stream reaches the client whole, with no extra events', async () => {
  assert.ok(thinkMs > 0, 'MODELGATE_THINK_MS must be set');
  const start = Date.now();
  const pausedChat = await chatEvents();
  const pausedResponses = await responsesEvents();
  assert.ok(Date.now() - start >= 2 * thinkMs, 'the platform did not pause');
  const plainChat = await chatEvents();
  const plainResponses = await responsesEvents();

  const want = simAnswer('sim-chat', 'think first');
  assert.equal(pausedChat.map((c) => c.choices[0]?.delta?.content ?? '').join(''), want);
  assert.equal(pausedChat.length, plainChat.length);
  for (const chunk of pausedChat) assert.equal(chunk.object, 'chat.completion.chunk');
  assert.deepEqual(pausedResponses.map((e) => e.type), plainResponses.map((e) => e.type));
  assert.equal(pausedResponses.at(-1).type, 'response.completed');
});
