import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { client, simAnswer, weatherTools } from './client.mjs';

const openai = client();

test('chat non-stream', async () => {
  const prompt = 'Hello from node';
  const res = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: prompt }],
  });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.model, 'gpt-4o-mini');
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.choices.length, 1);
  const [choice] = res.choices;
  assert.equal(choice.index, 0);
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.message.content, simAnswer('sim-chat', prompt));
  assert.equal(choice.finish_reason, 'stop');
  assert.ok(res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
});

test('chat stream with include_usage ends with one usage chunk', async () => {
  const prompt = 'Stream to node';
  const stream = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: prompt }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length > 2, `only ${chunks.length} chunks`);

  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage.prompt_tokens > 0 && last.usage.completion_tokens > 0);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
  const withUsage = chunks.filter((c) => c.usage != null);
  assert.equal(withUsage.length, 1, 'usage appears in exactly one chunk');

  const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
  assert.equal(text, simAnswer('sim-chat', prompt));
  const roles = chunks.flatMap((c) => c.choices.filter((ch) => ch.delta.role));
  assert.equal(roles.length, 1, 'role is sent once');
  const finishes = chunks.flatMap((c) => c.choices.filter((ch) => ch.finish_reason).map((ch) => ch.finish_reason));
  assert.deepEqual(finishes, ['stop']);
  for (const c of chunks) {
    assert.equal(c.id, chunks[0].id);
    assert.equal(c.created, chunks[0].created);
    assert.equal(c.model, 'gpt-4o-mini');
  }
});

test('chat.completions.stream assembles two parallel tool calls', async () => {
  const runner = openai.chat.completions.stream({
    model: 'sim-tools',
    messages: [{ role: 'user', content: 'Weather and time for Paris, in parallel please.' }],
    tools: weatherTools,
  });
  const completion = await runner.finalChatCompletion();
  assert.equal(completion.choices.length, 1);
  const [choice] = completion.choices;
  assert.equal(choice.finish_reason, 'tool_calls');
  const calls = choice.message.tool_calls;
  assert.equal(calls.length, 2);
  assert.deepEqual(calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  assert.ok(calls[0].id && calls[1].id && calls[0].id !== calls[1].id, 'distinct tool call ids');
  assert.ok('city' in JSON.parse(calls[0].function.arguments));
  const timeArgs = JSON.parse(calls[1].function.arguments);
  assert.ok('timezone' in timeArgs && 'hours' in timeArgs);
});

test('n=2 gives two indexed choices', async () => {
  const prompt = 'Two for node';
  const res = await openai.chat.completions.create({
    model: 'sim-chat',
    messages: [{ role: 'user', content: prompt }],
    n: 2,
  });
  assert.deepEqual(res.choices.map((c) => c.index), [0, 1]);
  for (const c of res.choices) {
    assert.equal(c.message.content, simAnswer('sim-chat', prompt));
    assert.equal(c.finish_reason, 'stop');
  }
  const one = await openai.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: prompt }] });
  assert.equal(res.usage.prompt_tokens, 2 * one.usage.prompt_tokens);
  assert.equal(res.usage.completion_tokens, 2 * one.usage.completion_tokens);
});

test('stop cuts before the stop sequence', async () => {
  const prompt = 'node likes pears and plums';
  const want = simAnswer('sim-chat', 'node likes pears and ');
  const res = await openai.chat.completions.create({
    model: 'sim-chat',
    messages: [{ role: 'user', content: prompt }],
    stop: ['plums'],
  });
  assert.equal(res.choices[0].message.content, want);
  assert.equal(res.choices[0].finish_reason, 'stop');

  const stream = await openai.chat.completions.create({
    model: 'sim-chat',
    messages: [{ role: 'user', content: prompt }],
    stop: 'plums',
    stream: true,
  });
  let text = '';
  const finishes = [];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      text += ch.delta.content ?? '';
      if (ch.finish_reason) finishes.push(ch.finish_reason);
    }
  }
  assert.equal(text, want);
  assert.deepEqual(finishes, ['stop']);
});

test('a wrong key rejects with AuthenticationError', async () => {
  const bad = client('mg-node-wrong-key');
  await assert.rejects(
    bad.chat.completions.create({ model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.AuthenticationError, `got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 401);
      return true;
    },
  );
});

// A custom tool call has no chunk type in the Chat Completions specification; modelgate sends
// the shape the live API sends (type "custom", a custom object with name and input). The raw
// stream parses, and a client rebuilds the call by concatenating custom.input.
test('chat stream with a custom tool call', async () => {
  const prompt = 'ls -la /tmp';
  const stream = await openai.chat.completions.create({
    model: 'sim-tools',
    messages: [{ role: 'user', content: prompt }],
    tools: [{ type: 'custom', custom: { name: 'shell', description: 'Runs a shell command.' } }],
    stream: true,
  });
  const calls = [];
  const finishes = [];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      if (ch.finish_reason) finishes.push(ch.finish_reason);
      for (const tc of ch.delta.tool_calls ?? []) {
        const call = (calls[tc.index] ??= { id: '', type: '', name: '', input: '' });
        call.id += tc.id ?? '';
        call.type += tc.type ?? '';
        assert.equal(tc.function, undefined, 'a custom call has no function object');
        call.name += tc.custom?.name ?? '';
        call.input += tc.custom?.input ?? '';
      }
    }
  }
  assert.equal(calls.length, 1);
  assert.match(calls[0].id, /^call_/);
  assert.equal(calls[0].type, 'custom');
  assert.equal(calls[0].name, 'shell');
  assert.equal(calls[0].input, prompt);
  assert.deepEqual(finishes, ['tool_calls']);
});
