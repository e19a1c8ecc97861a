// The Anthropic Messages route (/v1/messages) driven by the official @anthropic-ai/sdk.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

import { gatewayURL, gatewayKey, simAnswer } from './client.mjs';

const spentKey = process.env.MODELGATE_SPENT_KEY;

function anthropic(apiKey = gatewayKey) {
  // The SDK adds /v1/messages itself: the base URL is the gateway's root, as with ANTHROPIC_BASE_URL.
  return new Anthropic({ baseURL: gatewayURL, apiKey, maxRetries: 0, timeout: 20_000 });
}

const client = anthropic();

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

// Runs messages.stream to its end and returns the final message and the events seen.
async function streamed(params) {
  const stream = client.messages.stream(params);
  const events = [];
  stream.on('streamEvent', (ev) => events.push(ev.type === 'content_block_delta' ? `${ev.type}/${ev.delta.type}` : ev.type));
  const message = await stream.finalMessage();
  return { message, events };
}

test('messages text', async () => {
  const prompt = 'Hello from node';
  const msg = await client.messages.create({
    model: 'gpt-4o-mini',
    max_tokens: 128,
    system: [{ type: 'text', text: 'Be brief.' }],
    messages: [{ role: 'user', content: prompt }],
  });
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, 'gpt-4o-mini');
  assert.match(msg.id, /^msg_/);
  assert.deepEqual(msg.content, [{ type: 'text', text: simAnswer('sim-chat', prompt) }]);
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.stop_sequence, null);
  assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
});

test('messages.stream final message', async () => {
  const prompt = 'Stream to node';
  const { message, events } = await streamed({ model: 'gpt-4o-mini', max_tokens: 128, messages: [{ role: 'user', content: prompt }] });
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(events.filter((e) => e === 'content_block_delta/text_delta').length > 2, events.join(' '));
  assert.equal(message.content.length, 1);
  assert.equal(message.content[0].text, simAnswer('sim-chat', prompt));
  assert.equal(message.stop_reason, 'end_turn');
  assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0);
});

test('messages tool round trip', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await client.messages.create({ model: 'sim-tools', max_tokens: 256, tools: [weatherTool], messages });
  assert.equal(first.stop_reason, 'tool_use');
  const call = first.content.find((b) => b.type === 'tool_use');
  assert.ok(call, JSON.stringify(first.content));
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof call.input.city, 'string');

  messages.push({ role: 'assistant', content: first.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '18 degrees' }] });
  const second = await client.messages.create({ model: 'sim-tools', max_tokens: 256, tools: [weatherTool], messages });
  assert.equal(second.stop_reason, 'end_turn');
  assert.match(second.content[0].text, /The tool returned: 18 degrees/);
});

test('messages streamed tool call with input_json_delta', async () => {
  const stream = client.messages.stream({
    model: 'sim-tools',
    max_tokens: 256,
    tools: [weatherTool],
    tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Rome?' }],
  });
  const partials = [];
  stream.on('inputJson', (partial) => partials.push(partial));
  const message = await stream.finalMessage();
  assert.ok(partials.length > 1, `input arrived in ${partials.length} pieces`);
  assert.equal(message.stop_reason, 'tool_use');
  assert.equal(message.content[0].type, 'tool_use');
  assert.equal(typeof message.content[0].input.city, 'string');
  assert.equal(partials.join(''), JSON.stringify(message.content[0].input));
});

test('messages thinking out and back in', async () => {
  const params = {
    model: 'sim-chat',
    max_tokens: 2048,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: 'Think first' }],
  };
  const { message, events } = await streamed(params);
  assert.ok(events.includes('content_block_delta/thinking_delta'), events.join(' '));
  assert.ok(events.includes('content_block_delta/signature_delta'), events.join(' '));
  const [thinking, text] = message.content;
  assert.equal(thinking.type, 'thinking');
  assert.match(thinking.thinking, /Think first/);
  assert.match(thinking.signature, /^mgsig1\./);
  assert.equal(text.type, 'text');

  const next = await client.messages.create({
    ...params,
    messages: [...params.messages, { role: 'assistant', content: message.content }, { role: 'user', content: 'And now?' }],
  });
  assert.equal(next.content[0].type, 'thinking');
  assert.equal(next.stop_reason, 'end_turn');
});

test('messages stop sequences', async () => {
  const params = { model: 'gpt-4o-mini', max_tokens: 128, stop_sequences: ['beta'], messages: [{ role: 'user', content: 'alpha beta gamma' }] };
  const want = 'Hello from sim-chat. You said: alpha ';
  const msg = await client.messages.create(params);
  assert.equal(msg.content[0].text, want);
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, 'beta');
  const { message } = await streamed(params);
  assert.equal(message.content[0].text, want);
  assert.equal(message.stop_reason, 'stop_sequence');
  assert.equal(message.stop_sequence, 'beta');
});

test('messages count_tokens', async () => {
  const messages = [{ role: 'user', content: 'How many tokens is this?' }];
  const counted = await client.messages.countTokens({ model: 'gpt-4o-mini', messages });
  assert.ok(counted.input_tokens > 0);
  const msg = await client.messages.create({ model: 'gpt-4o-mini', max_tokens: 64, messages });
  assert.equal(counted.input_tokens, msg.usage.input_tokens);
});

test('messages bad key is 401 authentication_error', async () => {
  await assert.rejects(
    anthropic('mg-wrong-key').messages.create({ model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    (err) => {
      assert.ok(err instanceof Anthropic.AuthenticationError, `${err}`);
      assert.equal(err.status, 401);
      assert.equal(err.error.type, 'error');
      assert.equal(err.error.error.type, 'authentication_error');
      assert.ok(err.requestID, 'request-id header');
      return true;
    },
  );
});

test('messages without max_tokens is 400 invalid_request_error', async () => {
  await assert.rejects(
    client.messages.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    (err) => {
      assert.ok(err instanceof Anthropic.BadRequestError, `${err}`);
      assert.equal(err.error.error.type, 'invalid_request_error');
      assert.match(err.error.error.message, /max_tokens/);
      return true;
    },
  );
});

test('messages mid-stream platform failure is an error', async () => {
  const stream = client.messages.stream({ model: 'sim-error-event', max_tokens: 64, messages: [{ role: 'user', content: 'fail please' }] });
  let text = '';
  stream.on('text', (delta) => { text += delta; });
  await assert.rejects(stream.finalMessage(), (err) => {
    assert.ok(err instanceof Anthropic.APIError, `${err}`);
    assert.equal(err.error.error.type, 'api_error');
    return true;
  });
  assert.ok(text.length > 0, 'text before the failure was streamed');
});

test('messages with a spent daily budget is 429 rate_limit_error', async () => {
  assert.ok(spentKey, 'MODELGATE_SPENT_KEY is set by TestNodeClient');
  const spent = anthropic(spentKey);
  await spent.messages.create({ model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'spend the day '.repeat(40) }] });
  await assert.rejects(
    spent.messages.create({ model: 'gpt-4o-mini', max_tokens: 16, messages: [{ role: 'user', content: 'again' }] }),
    (err) => {
      assert.ok(err instanceof Anthropic.RateLimitError, `${err}`);
      assert.equal(err.status, 429);
      assert.equal(err.error.error.type, 'rate_limit_error');
      assert.equal(err.headers.get('x-should-retry'), 'false');
      assert.ok(Number(err.headers.get('retry-after')) >= 1);
      assert.ok(!Number.isNaN(Date.parse(err.headers.get('anthropic-ratelimit-tokens-reset'))));
      return true;
    },
  );
});
