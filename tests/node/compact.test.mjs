// POST /v1/responses/compact and /v1/responses/input_tokens, with the official openai npm
// client's responses.compact and responses.inputTokens.count (issue 44).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

import OpenAI from 'openai';
import { client, gatewayURL, gatewayKey } from './client.mjs';

const openai = client();

// A 10-turn conversation held by the client: each turn sends the whole history.
async function tenTurns() {
  const history = [];
  let last;
  for (let i = 0; i < 10; i++) {
    history.push({ role: 'user', content: `compact turn ${i}: what do you think about subject ${i}?` });
    last = await openai.responses.create({ model: 'gpt-4o-mini', input: history });
    assert.ok(last.output_text.endsWith(`You said: ${history.at(-1).content}`), last.output_text);
    history.push(...last.output);
  }
  return { history, last };
}

test('responses.compact shortens a 10-turn conversation into an input the next call accepts', async () => {
  const { history, last } = await tenTurns();
  const compacted = await openai.responses.compact({ model: 'gpt-4o-mini', input: history });
  assert.equal(compacted.object, 'response.compaction');
  assert.match(compacted.id, /^cmp_/);
  assert.ok(compacted.created_at > 0);
  assert.ok(compacted.usage.input_tokens > 0 && compacted.usage.output_tokens > 0, JSON.stringify(compacted.usage));

  // The user messages in order, then the summary.
  assert.equal(compacted.output.length, 11);
  compacted.output.slice(0, 10).forEach((item, i) => {
    assert.equal(item.role, 'user');
    assert.equal(item.content, history[2 * i].content);
  });
  const summary = compacted.output[10];
  assert.equal(summary.type, 'message');
  assert.equal(summary.role, 'assistant');
  assert.match(summary.content[0].text, /^Summary of the earlier conversation:\n/);

  // Shorter than the original, in bytes and in the gateway's own count.
  assert.ok(JSON.stringify(compacted.output).length < JSON.stringify(history).length);
  const before = await openai.responses.inputTokens.count({ model: 'gpt-4o-mini', input: history });
  const after = await openai.responses.inputTokens.count({ model: 'gpt-4o-mini', input: compacted.output });
  assert.equal(before.object, 'response.input_tokens');
  assert.ok(after.input_tokens < before.input_tokens, `compacted ${after.input_tokens} tokens, original ${before.input_tokens}`);

  // The next call takes the compacted output as its input.
  const next = await openai.responses.create({
    model: 'gpt-4o-mini',
    input: [...compacted.output, { role: 'user', content: 'and now the next step' }],
  });
  assert.ok(next.output_text.endsWith('You said: and now the next step'), next.output_text);

  // A conversation kept by modelgate is compacted from its last response's id.
  const chained = await openai.responses.create({ model: 'gpt-4o-mini', input: 'one more', previous_response_id: last.id });
  const byID = await openai.responses.compact({ model: 'gpt-4o-mini', previous_response_id: chained.id });
  assert.equal(byID.output.at(-1).role, 'assistant');
  assert.equal(byID.output.at(-2).content[0].text, 'one more');
});

test('responses.compact refuses what it cannot compact, in the OpenAI error shape', async () => {
  await assert.rejects(
    openai.responses.compact({ model: 'gpt-4o-mini', input: 'x', stream: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'unknown_parameter' && e.param === 'stream',
  );
  await assert.rejects(
    openai.responses.compact({ model: 'gpt-4o-mini', input: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input',
  );
});

test('responses.inputTokens.count grows with the input and agrees with count_tokens', async () => {
  const text = 'The gateway counts the tokens of this sentence, again and again. '.repeat(30);
  const counts = [];
  for (const n of [1, 2, 4]) {
    const r = await openai.responses.inputTokens.count({
      model: 'gpt-4o-mini',
      input: [{ role: 'user', content: text.repeat(n) }],
    });
    assert.equal(r.object, 'response.input_tokens');
    counts.push(r.input_tokens);
  }
  assert.ok(counts[0] > 0 && counts[0] < counts[1] && counts[1] < counts[2], counts.join(' < '));

  const anthropic = new Anthropic({ baseURL: gatewayURL, apiKey: gatewayKey, maxRetries: 0, timeout: 20_000 });
  const messages = await anthropic.messages.countTokens({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }] });
  const diff = Math.abs(counts[0] - messages.input_tokens) / messages.input_tokens;
  assert.ok(diff <= 0.1, `input_tokens ${counts[0]} and count_tokens ${messages.input_tokens} differ by ${(diff * 100).toFixed(1)}%`);
});
