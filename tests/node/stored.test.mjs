// Conversations kept by modelgate, held the Responses way: previous_response_id, retrieve,
// inputItems.list and delete, with the official openai npm client.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import OpenAI from 'openai';
import { client, simAnswer, sameTeamKey, otherTeamKey } from './client.mjs';

const openai = client();

async function streamed(params) {
  const stream = await openai.responses.create({ ...params, stream: true });
  let final;
  for await (const event of stream) {
    if (event.type === 'response.completed') final = event.response;
  }
  assert.ok(final, 'no response.completed');
  return final;
}

test('a three-turn conversation by previous_response_id, one turn streamed', async () => {
  const r1 = await openai.responses.create({ model: 'gpt-4o-mini', input: 'node one', instructions: 'Be brief.' });
  const r2 = await streamed({ model: 'gpt-4o-mini', input: 'node two', previous_response_id: r1.id });
  const r3 = await openai.responses.create({
    model: 'gpt-4o-mini',
    input: [{ role: 'user', content: 'node three' }],
    previous_response_id: r2.id,
  });
  assert.equal(r3.output_text, simAnswer('sim-chat', 'node three'));

  // Another key of the same team reads the conversation back.
  const mate = client(sameTeamKey);
  const got = await mate.responses.retrieve(r2.id);
  assert.equal(got.id, r2.id);
  assert.equal(got.status, 'completed');
  assert.equal(got.previous_response_id, r1.id);
  assert.equal(got.output_text, simAnswer('sim-chat', 'node two'));

  const items = [];
  for await (const item of mate.responses.inputItems.list(r3.id, { order: 'asc' })) items.push(item);
  assert.equal(items.length, 1);
  assert.equal(items[0].type, 'message');
  assert.equal(items[0].content, 'node three');
  assert.ok(items[0].id);

  // Another team sees nothing.
  const other = client(otherTeamKey);
  await assert.rejects(other.responses.retrieve(r3.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.inputItems.list(r3.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.delete(r3.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    other.responses.create({ model: 'sim-chat', input: 'x', previous_response_id: r3.id }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'previous_response_not_found',
  );

  // Deleted: gone, and the conversation cannot go on from it.
  await mate.responses.delete(r3.id);
  await assert.rejects(openai.responses.retrieve(r3.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(
    openai.responses.create({ model: 'gpt-4o-mini', input: 'x', previous_response_id: r3.id }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'previous_response_not_found',
  );
});

test('store: false is not kept', async () => {
  const r = await openai.responses.create({ model: 'gpt-4o-mini', input: 'not kept', store: false });
  await assert.rejects(openai.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
});

test('input items page as OpenAI pages them', async () => {
  const input = [1, 2, 3, 4, 5].map((n) => ({ role: 'user', content: `part ${n}` }));
  const r = await openai.responses.create({ model: 'gpt-4o-mini', input });
  const first = await openai.responses.inputItems.list(r.id, { limit: 2 });
  assert.deepEqual(first.data.map((i) => i.content), ['part 5', 'part 4']); // newest first by default
  assert.equal(first.has_more, true);
  const all = [];
  for await (const item of openai.responses.inputItems.list(r.id, { limit: 2, order: 'asc' })) all.push(item.content);
  assert.deepEqual(all, ['part 1', 'part 2', 'part 3', 'part 4', 'part 5']);
});
