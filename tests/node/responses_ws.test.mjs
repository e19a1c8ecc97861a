// The Responses WebSocket mode (GET /v1/responses upgraded) driven by the official openai
// package's ResponsesWS. TestNodeClient checks the other side afterwards: what the platform
// received for the tool loop, and the log line of the turn whose client left.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import OpenAI from 'openai';
import { client, simAnswer, otherTeamKey } from './client.mjs';
import { Socket, loopTools } from './socket.mjs';

// Marks TestNodeClient looks for in what the platform received and in the log.
const loopFirst = 'ws loop one: what is the weather in Paris?';
const loopThird = 'ws loop three: now the weather and the time, in parallel';
const toolResult = '{"city":"Paris","temp_c":18}';
const goneMark = 'ws client leaves mid-stream';

function completed(result, what) {
  assert.equal(result.last.type, 'response.completed', `${what}: ${JSON.stringify(result.last)}`);
  assert.equal(result.events[0].type, 'response.created', what);
  for (let i = 1; i < result.events.length; i++) {
    assert.ok(result.events[i].sequence_number > result.events[i - 1].sequence_number, `${what}: sequence at event ${i}`);
  }
  return result.response;
}

function calls(response) {
  return response.output.filter((o) => o.type === 'function_call');
}

test('a three-turn tool loop with store: false sends only new items after the first turn', async () => {
  const ws = new Socket();
  const base = { type: 'response.create', model: 'sim-tools', store: false, tools: loopTools };

  // 1: the model calls a tool.
  const r1 = completed(await ws.turn({ ...base, input: loopFirst }), 'turn 1');
  const [call] = calls(r1);
  assert.ok(call, JSON.stringify(r1.output));
  assert.equal(calls(r1).length, 1);
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof JSON.parse(call.arguments).city, 'string');

  // 2: the tool's result, and nothing else; the model answers with it.
  const r2 = completed(
    await ws.turn({ ...base, previous_response_id: r1.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: toolResult }] }),
    'turn 2',
  );
  assert.equal(r2.output_text ?? r2.output.find((o) => o.type === 'message').content[0].text, `Hello from sim-tools. The tool returned: ${toolResult}`);

  // 3: a new question; the model calls both tools.
  const r3 = completed(
    await ws.turn({ ...base, previous_response_id: r2.id, input: [{ role: 'user', content: loopThird }] }),
    'turn 3',
  );
  assert.deepEqual(calls(r3).map((c) => c.name), ['get_weather', 'get_time']);

  // The platform got the whole conversation each turn: its input grew, turn by turn.
  assert.ok(r1.usage.input_tokens < r2.usage.input_tokens && r2.usage.input_tokens < r3.usage.input_tokens,
    `input tokens ${r1.usage.input_tokens}, ${r2.usage.input_tokens}, ${r3.usage.input_tokens}`);

  // What crossed the wire: turns 2 and 3 carried their one new item and the id, no history.
  const sent = ws.sent();
  assert.equal(sent.length, 3, 'three frames sent');
  assert.equal(sent[0].input, loopFirst);
  assert.equal(sent[1].previous_response_id, r1.id);
  assert.deepEqual(sent[1].input, [{ type: 'function_call_output', call_id: call.call_id, output: toolResult }]);
  assert.equal(sent[2].previous_response_id, r2.id);
  assert.deepEqual(sent[2].input, [{ role: 'user', content: loopThird }]);
  for (const frame of sent.slice(1)) {
    const text = JSON.stringify(frame);
    assert.ok(!text.includes('Paris?') && !text.includes('Hello from'), `an earlier turn's item was sent again: ${text}`);
  }
  assert.deepEqual(ws.errors, []);
  assert.deepEqual(ws.stray, []);

  // store: false kept nothing: the chain lived on the connection only.
  await assert.rejects(client().responses.retrieve(r3.id), (e) => e instanceof OpenAI.NotFoundError);
  const { code } = await ws.close();
  assert.equal(code, 1000);

  // On another connection the chain is gone.
  const again = new Socket();
  const lost = await again.turn({ ...base, previous_response_id: r3.id, input: [{ role: 'user', content: 'and then?' }] });
  assert.equal(lost.last.type, 'error');
  assert.equal(lost.last.status, 400);
  assert.equal(lost.last.error.code, 'previous_response_not_found');
  assert.equal(lost.last.error.param, 'previous_response_id');
  await again.close();
});

test('a refused turn is an error event like the HTTP error, and the next turn on the connection is served', async () => {
  // Team beta may use sim-chat only.
  const refused = { model: 'sim-tools', input: 'not for this key', store: false };
  const http = await client(otherTeamKey).responses.create(refused).then(
    () => assert.fail('HTTP served a model the key may not use'),
    (e) => e,
  );
  assert.ok(http instanceof OpenAI.APIError, `${http}`);

  const ws = new Socket(otherTeamKey);
  const bad = await ws.turn({ type: 'response.create', ...refused });
  assert.equal(bad.events.length, 1, JSON.stringify(bad.events));
  assert.equal(bad.last.type, 'error');
  assert.equal(bad.last.status, http.status);
  assert.equal(bad.last.error.type, http.type);
  assert.equal(bad.last.error.code, http.code);
  assert.equal(bad.last.error.param, http.param);
  assert.equal(bad.last.error.message, http.error.message);
  // The SDK reported it through its 'error' listener, with the event attached.
  assert.equal(ws.errors.length, 1);
  assert.equal(ws.errors[0].error.error.code, http.code);

  const prompt = 'after the refusal';
  const good = completed(await ws.turn({ type: 'response.create', model: 'sim-chat', input: prompt, store: false }), 'the turn after');
  assert.equal(good.output.find((o) => o.type === 'message').content[0].text, simAnswer('sim-chat', prompt));
  assert.equal(ws.errors.length, 1);
  await ws.close();
});

test('a client that leaves mid-stream ends its turn', async () => {
  const ws = new Socket();
  const deltas = [];
  const left = new Promise((resolve) => {
    ws.ws.on('response.output_text.delta', (ev) => {
      deltas.push(ev.delta);
      if (deltas.length === 1) resolve(ws.close());
    });
  });
  // sim-slow paces its events, so the stream is still running when the client leaves (sim-long
  // sends its 200 deltas at once: they all arrive before the close could cut anything).
  ws.ws.send({ type: 'response.create', model: 'sim-slow', store: false, input: `${goneMark}: ${'keep talking '.repeat(20)}` });
  const { code } = await left;
  assert.equal(code, 1000);
  assert.ok(deltas.length < 20, `${deltas.length} deltas arrived before the close`);
  assert.ok(!ws.stray.some((ev) => ev.type === 'response.completed'), 'the turn completed');
});
