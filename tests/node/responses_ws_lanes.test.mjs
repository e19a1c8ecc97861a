// Lanes (stream_id) and steering (response.steer) on the Responses WebSocket mode, driven by
// the official openai package's ResponsesWS and its ResponsesWebSocketSession helper.
// TestNodeClient checks the other side afterwards: the steered turn's log line, charged and
// settled once (checkNodeLanes).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ResponsesWS } from 'openai/resources/responses/ws';
import { ResponsesWebSocketSession } from 'openai/lib/responses/responses-websocket-session';
import { client, simAnswer, sameTeamKey } from './client.mjs';

// These tests use the team's second key: TestNodeClient tells their turns apart by it. A lane
// sends on the open socket only, so the session is made once it is open.
async function session() {
  const ws = new ResponsesWS(client(sameTeamKey));
  const events = [];
  ws.on('event', (ev) => events.push(ev));
  ws.on('error', () => {}); // error events are checked on the lanes
  if (ws.socket.readyState !== 1) await new Promise((resolve) => ws.socket.on('open', resolve));
  const s = new ResponsesWebSocketSession(ws, { maxLanes: 4, maxBufferedEvents: 10_000, maxBufferedBytes: 16 << 20 });
  return { ws, s, events };
}

// close ends a test's session and socket whether it passed or not: a socket left open keeps
// node running, and TestNodeClient would then report a timeout instead of the failed assertion.
function close(ws, s) {
  s.close();
  ws.close({ code: 1000, reason: 'done' });
}

test('two lanes on one connection each complete a turn with their own stream_id', async () => {
  const { ws, s, events } = await session();
  try {
    const long = s.lane('lane-long');
    const chat = s.lane('lane-chat');
    long.create({ model: 'sim-long', store: false, input: 'the long lane' });
    chat.create({ model: 'sim-chat', store: false, input: 'the chat lane' });
    const [rl, rc] = await Promise.all([long.finalResponse(), chat.finalResponse()]);
    assert.equal(rl.status, 'completed');
    assert.equal(rc.status, 'completed');
    assert.equal(rc.output_text, simAnswer('sim-chat', 'the chat lane'));
    assert.ok(rl.output_text.length > rc.output_text.length);
    assert.notEqual(rl.id, rc.id);

    // Every event came with its lane's stream_id, and each lane saw only its own response.
    assert.ok(events.length > 4);
    for (const ev of events) {
      assert.ok(['lane-long', 'lane-chat'].includes(ev.stream_id), `an event without its lane: ${JSON.stringify(ev).slice(0, 200)}`);
      if (ev.response) assert.equal(ev.response.id, ev.stream_id === 'lane-long' ? rl.id : rc.id);
    }

    // A chain crosses lanes: the chat lane continues the long lane's response.
    chat.create({ model: 'sim-chat', store: false, previous_response_id: rl.id, input: 'and after the long one' });
    const next = await chat.finalResponse();
    assert.equal(next.output_text, simAnswer('sim-chat', 'and after the long one'));
    assert.ok(next.usage.input_tokens > rl.usage.input_tokens, `${next.usage.input_tokens} <= ${rl.usage.input_tokens}`);
  } finally {
    close(ws, s);
  }
});

test('a steered response ends incomplete (steered), charged, and its successor completes', async () => {
  const { ws, s, events } = await session();
  try {
    const lane = s.lane('steered');
    const prompt = `steer me: ${'keep talking '.repeat(40)}`;
    lane.create({ model: 'sim-slow', store: false, input: prompt });
    let id;
    for (;;) {
      const ev = await lane.receive();
      if (ev.type === 'response.created') id = ev.response.id;
      if (ev.type === 'response.output_text.delta') break;
    }
    assert.ok(id);
    ws.send({ type: 'response.steer', previous_response_id: id, input: [{ role: 'user', content: 'stop and say hi' }] });

    const steered = await lane.finalResponse();
    assert.equal(steered.id, id);
    assert.equal(steered.status, 'incomplete');
    assert.equal(steered.incomplete_details.reason, 'steered');
    assert.ok(steered.usage.output_tokens > 0, JSON.stringify(steered.usage));
    assert.ok(steered.usage.input_tokens > 0, JSON.stringify(steered.usage));
    // What streamed before the steer's boundary, and no more: a start of the whole answer.
    const whole = simAnswer('sim-slow', prompt);
    assert.ok(steered.output_text.length > 0 && steered.output_text.length < whole.length, steered.output_text);
    assert.ok(whole.startsWith(steered.output_text), steered.output_text);

    const successor = await lane.finalResponse();
    assert.equal(successor.status, 'completed');
    assert.notEqual(successor.id, id);
    assert.equal(successor.output_text, simAnswer('sim-slow', 'stop and say hi'));
    // The successor continued the steered response: its input held the conversation so far.
    assert.ok(successor.usage.input_tokens > steered.usage.input_tokens);

    const accepted = events.filter((ev) => ev.type === 'response.steer.accepted');
    assert.equal(accepted.length, 1);
    assert.equal(accepted[0].stream_id, 'steered');
    assert.equal(accepted[0].steer.previous_response_id, id);
    assert.match(accepted[0].steer.id, /^steer_/);
    // The acceptance came before the successor's response.created, its commit point.
    const at = (pred) => events.findIndex(pred);
    assert.ok(at((ev) => ev.type === 'response.steer.accepted') < at((ev) => ev.type === 'response.created' && ev.response.id === successor.id));

    // Steering a finished response fails, with the input returned.
    ws.send({ type: 'response.steer', previous_response_id: id, input: 'too late' });
    const failed = await new Promise((resolve) => {
      ws.on('event', (ev) => {
        if (ev.type === 'response.steer.failed') resolve(ev);
      });
    });
    assert.equal(failed.error.code, 'response_already_completed');
    assert.equal(failed.steer.input, 'too late');
  } finally {
    close(ws, s);
  }
});
