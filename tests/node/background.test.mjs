// Background responses run by modelgate, with the official openai npm client: submit, poll,
// cancel, and another team kept out.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import OpenAI from 'openai';
import { client, simAnswer, otherTeamKey } from './client.mjs';

const openai = client();

async function poll(id, done = (r) => r.status !== 'queued' && r.status !== 'in_progress') {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = await openai.responses.retrieve(id);
    if (done(r)) return r;
    assert.ok(Date.now() < deadline, `${id} stayed ${r.status}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('a background response is queued at once and polled to completed', async () => {
  const queued = await openai.responses.create({ model: 'gpt-4o-mini', input: 'node background', background: true });
  assert.equal(queued.status, 'queued');
  assert.equal(queued.background, true);
  assert.match(queued.id, /^resp_/);
  const done = await poll(queued.id);
  assert.equal(done.status, 'completed');
  assert.equal(done.id, queued.id);
  assert.equal(done.output_text, simAnswer('sim-chat', 'node background'));
  assert.ok(done.usage.output_tokens > 0);
});

test('a slow background response is cancelled; another team can neither poll nor cancel it', async () => {
  // sim-slow paces its events: a long prompt keeps it busy for seconds.
  const prompt = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  const queued = await openai.responses.create({ model: 'sim-slow', input: prompt, background: true });
  const other = client(otherTeamKey);
  await assert.rejects(other.responses.retrieve(queued.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.cancel(queued.id), (e) => e instanceof OpenAI.NotFoundError);

  const cancelled = await openai.responses.cancel(queued.id);
  assert.equal(cancelled.id, queued.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await poll(queued.id)).status, 'cancelled');
  // Cancelling a finished response answers it as it is.
  assert.equal((await openai.responses.cancel(queued.id)).status, 'cancelled');
});

test('background with store: false is refused', async () => {
  await assert.rejects(
    openai.responses.create({ model: 'gpt-4o-mini', input: 'x', background: true, store: false }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'store',
  );
});
