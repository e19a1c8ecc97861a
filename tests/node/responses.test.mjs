import { test } from 'node:test';
import assert from 'node:assert/strict';

import { client, simAnswer } from './client.mjs';

const openai = client();

test('responses.create stream:true ends with response.completed', async () => {
  const prompt = 'Responses from node';
  const stream = await openai.responses.create({ model: 'gpt-4o-mini', input: prompt, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  assert.ok(events.length > 4, `only ${events.length} events`);

  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.completed');
  assert.equal(types.filter((t) => t === 'response.completed').length, 1);
  for (let i = 1; i < events.length; i++) {
    assert.ok(events[i].sequence_number > events[i - 1].sequence_number, `sequence at event ${i}`);
  }

  const want = simAnswer('sim-chat', prompt);
  const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(deltas, want);
  const done = events.at(-1).response;
  assert.equal(done.status, 'completed');
  assert.equal(done.output.find((o) => o.type === 'message').content[0].text, want);
  assert.ok(done.usage.input_tokens > 0 && done.usage.output_tokens > 0);
});
