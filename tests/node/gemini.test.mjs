// The Gemini routes with Google's own client, @google/genai: what the SDK sends, and how it
// reads what modelgate answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError, GoogleGenAI, Type } from '@google/genai';

import { gatewayURL, gatewayKey, otherTeamKey, simAnswer } from './client.mjs';

// Every URL the SDK fetched, so the tests can tell which API version each call used.
const fetched = [];
function recordingFetch(input, init) {
  fetched.push(typeof input === 'string' ? input : (input.url ?? String(input)));
  return fetch(input, init);
}

// A client of the gateway. @google/genai 3.x sends /v1 unless told apiVersion 'v1beta' (what
// the Gemini CLI uses); one attempt, so a refusal is seen as it came.
function gemini({ apiKey = gatewayKey, apiVersion } = {}) {
  return new GoogleGenAI({
    apiKey,
    httpOptions: {
      baseUrl: gatewayURL,
      ...(apiVersion ? { apiVersion } : {}),
      timeout: 20_000,
      retryOptions: { attempts: 1 },
      fetch: recordingFetch,
    },
  });
}

const v1beta = gemini({ apiVersion: 'v1beta' });
const v1 = gemini();

// Prompts of refused calls carry this; TestNodeClient checks no platform call ever did.
const refusedMark = 'gemini-refused-canary';

// fetchedSince is the paths (without the gateway's address) fetched since mark.
function fetchedSince(mark) {
  return fetched.slice(mark).map((u) => u.slice(gatewayURL.length).replace(/\?.*/, ''));
}

function checkUsage(u) {
  assert.ok(u.promptTokenCount > 0 && u.candidatesTokenCount > 0, JSON.stringify(u));
  assert.equal(u.totalTokenCount, u.promptTokenCount + u.candidatesTokenCount + (u.thoughtsTokenCount ?? 0));
}

for (const [version, ai] of [['v1beta', v1beta], ['v1', v1]]) {
  test(`generateContent over /${version}`, async () => {
    const mark = fetched.length;
    const prompt = `Hello from genai over ${version}`;
    const res = await ai.models.generateContent({ model: 'sim-chat', contents: prompt });
    assert.deepEqual(fetchedSince(mark), [`/${version}/models/sim-chat:generateContent`]);
    assert.equal(res.text, simAnswer('sim-chat', prompt));
    assert.equal(res.candidates.length, 1);
    assert.equal(res.candidates[0].content.role, 'model');
    assert.equal(res.candidates[0].finishReason, 'STOP');
    assert.equal(res.modelVersion, 'sim-chat');
    assert.ok(res.responseId, 'a responseId');
    checkUsage(res.usageMetadata);
  });
}

test('generateContentStream streams the text in several chunks, the last with the finish and usage', async () => {
  const mark = fetched.length;
  const prompt = 'Stream to genai';
  const stream = await v1beta.models.generateContentStream({ model: 'sim-chat', contents: prompt });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.deepEqual(fetchedSince(mark), ['/v1beta/models/sim-chat:streamGenerateContent']);
  assert.ok(fetched.at(-1).endsWith('?alt=sse'), fetched.at(-1));
  assert.ok(chunks.length > 2, `only ${chunks.length} chunks`);
  assert.equal(chunks.map((c) => c.text ?? '').join(''), simAnswer('sim-chat', prompt));
  const finishes = chunks.flatMap((c) => (c.candidates ?? []).map((k) => k.finishReason).filter(Boolean));
  assert.deepEqual(finishes, ['STOP']);
  checkUsage(chunks.at(-1).usageMetadata);
});

// One function the simulated platform's sim-tools calls, declared in Google's OpenAPI subset
// (upper-case types), which modelgate converts to JSON Schema.
const weather = {
  functionDeclarations: [
    {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] },
    },
  ],
};

test('a function call and its functionResponse: the model asks, the test answers, the model replies', async () => {
  const contents = [{ role: 'user', parts: [{ text: 'What is the weather in Paris?' }] }];
  const first = await v1beta.models.generateContent({ model: 'sim-tools', contents, config: { tools: [weather] } });
  assert.equal(first.functionCalls?.length, 1, JSON.stringify(first.candidates));
  const [call] = first.functionCalls;
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(call.args, { city: 'sim city' });
  assert.equal(first.candidates[0].finishReason, 'STOP');

  // The SDK's history: the model's turn as it came, then the function's result.
  contents.push(first.candidates[0].content);
  contents.push({
    role: 'user',
    parts: [{ functionResponse: { id: call.id, name: call.name, response: { temperature: 21, sky: 'clear' } } }],
  });
  const second = await v1beta.models.generateContent({ model: 'sim-tools', contents, config: { tools: [weather] } });
  assert.equal(second.functionCalls, undefined);
  assert.match(second.text, /^Hello from sim-tools\. The tool returned: /);
  assert.deepEqual(JSON.parse(second.text.replace(/^[^{]*/, '')), { temperature: 21, sky: 'clear' });
});

test('a function call streamed arrives whole in one chunk', async () => {
  const stream = await v1beta.models.generateContentStream({
    model: 'sim-tools',
    contents: 'What is the weather in Oslo?',
    config: { tools: [weather] },
  });
  const calls = [];
  for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(calls[0].args, { city: 'sim city' });
});

test('structured output: responseMimeType application/json with a responseSchema parses', async () => {
  const res = await v1beta.models.generateContent({
    model: 'sim-json',
    contents: 'A city and its population, please.',
    config: {
      responseMimeType: 'application/json',
      responseSchema: {
        type: Type.OBJECT,
        properties: { city: { type: Type.STRING }, population: { type: Type.INTEGER } },
        required: ['city', 'population'],
        propertyOrdering: ['city', 'population'],
      },
    },
  });
  // sim-json fills the schema the platform received: its properties made it through.
  assert.deepEqual(JSON.parse(res.text), { city: 'sim city', population: 1 });
  assert.equal(res.candidates[0].finishReason, 'STOP');

  // The same with a JSON Schema (responseJsonSchema), passed on as is.
  const js = await v1.models.generateContent({
    model: 'sim-json',
    contents: 'A river and its length, please.',
    config: {
      responseMimeType: 'application/json',
      responseJsonSchema: {
        type: 'object',
        properties: { river: { type: 'string' }, km: { type: 'number', minimum: 2 } },
        required: ['river', 'km'],
      },
    },
  });
  assert.deepEqual(JSON.parse(js.text), { river: 'sim river', km: 2 });
});

test('stopSequences cut the answer before the sequence; candidateCount 2 gives two candidates', async () => {
  const prompt = 'genai likes pears and plums';
  const cut = await v1beta.models.generateContent({ model: 'sim-chat', contents: prompt, config: { stopSequences: ['plums'] } });
  assert.equal(cut.text, simAnswer('sim-chat', 'genai likes pears and '));
  assert.equal(cut.candidates[0].finishReason, 'STOP');

  const two = await v1beta.models.generateContent({ model: 'sim-chat', contents: 'Two for genai', config: { candidateCount: 2 } });
  assert.deepEqual(two.candidates.map((c) => c.index ?? 0), [0, 1]);
  for (const c of two.candidates) {
    assert.equal(c.content.parts.map((p) => p.text).join(''), simAnswer('sim-chat', 'Two for genai'));
  }
});

test('countTokens over both versions: a count that grows with the text', async () => {
  const mark = fetched.length;
  const short = await v1beta.models.countTokens({ model: 'sim-chat', contents: 'Count me.' });
  const long = await v1.models.countTokens({ model: 'sim-chat', contents: 'Count me. '.repeat(50) });
  assert.deepEqual(fetchedSince(mark), ['/v1beta/models/sim-chat:countTokens', '/v1/models/sim-chat:countTokens']);
  assert.ok(short.totalTokens > 0, JSON.stringify(short));
  assert.ok(long.totalTokens > short.totalTokens, `${long.totalTokens} <= ${short.totalTokens}`);
});

// refusal runs call, which must fail with an ApiError of status and Google's error body.
async function refusal(call, status, googleStatus) {
  const err = await call().then(
    (res) => assert.fail(`served: ${JSON.stringify(res)}`),
    (e) => e,
  );
  assert.ok(err instanceof ApiError, `${err}`);
  assert.equal(err.status, status, err.message);
  const body = JSON.parse(err.message);
  assert.equal(body.error.code, status);
  assert.equal(body.error.status, googleStatus);
  assert.ok(body.error.message.length > 0);
  return body;
}

test('an unknown key is a 401 UNAUTHENTICATED, on both versions and streamed', async () => {
  const contents = `${refusedMark}: unknown key`;
  for (const ai of [gemini({ apiKey: 'mg-not-a-key', apiVersion: 'v1beta' }), gemini({ apiKey: 'mg-not-a-key' })]) {
    const body = await refusal(() => ai.models.generateContent({ model: 'sim-chat', contents }), 401, 'UNAUTHENTICATED');
    assert.ok(!body.error.message.includes('mg-not-a-key'), 'the key is echoed');
  }
  const stream = gemini({ apiKey: 'mg-not-a-key', apiVersion: 'v1beta' });
  await refusal(() => stream.models.generateContentStream({ model: 'sim-chat', contents }), 401, 'UNAUTHENTICATED');
});

test('a model outside the key’s allow-list is a 404 NOT_FOUND', async () => {
  // Team beta may use sim-chat only.
  const contents = `${refusedMark}: not for this key`;
  for (const apiVersion of ['v1beta', undefined]) {
    const ai = gemini({ apiKey: otherTeamKey, apiVersion });
    await refusal(() => ai.models.generateContent({ model: 'sim-tools', contents }), 404, 'NOT_FOUND');
    await refusal(() => ai.models.countTokens({ model: 'sim-tools', contents }), 404, 'NOT_FOUND');
  }
  // The same key is served the model it may use.
  const ok = await gemini({ apiKey: otherTeamKey, apiVersion: 'v1beta' }).models.generateContent({
    model: 'sim-chat',
    contents: 'beta may',
  });
  assert.equal(ok.text, simAnswer('sim-chat', 'beta may'));
});

test('models.list and models.get over both versions: Google’s model objects, within the key’s list', async () => {
  for (const ai of [v1beta, v1]) {
    const names = [];
    for await (const m of await ai.models.list()) {
      names.push(m.name);
      assert.ok(m.supportedActions?.includes('generateContent'), JSON.stringify(m));
    }
    assert.ok(names.includes('models/sim-chat') && names.includes('models/sim-tools'), names.join());
    const one = await ai.models.get({ model: 'sim-tools' });
    assert.equal(one.name, 'models/sim-tools');
  }
  // Team beta sees sim-chat only, and asking for another model is Google's 404.
  const beta = gemini({ apiKey: otherTeamKey, apiVersion: 'v1beta' });
  const betaNames = [];
  for await (const m of await beta.models.list()) betaNames.push(m.name);
  assert.deepEqual(betaNames, ['models/sim-chat']);
  await refusal(() => beta.models.get({ model: 'sim-tools' }), 404, 'NOT_FOUND');
});

test('a platform failure is an ApiError: before the answer, and in the middle of a stream', async () => {
  await refusal(() => v1beta.models.generateContent({ model: 'sim-failed', contents: 'fail please' }), 502, 'UNAVAILABLE');
  // sim-error-event streams its text, then an error event instead of its end.
  const stream = await v1beta.models.generateContentStream({ model: 'sim-error-event', contents: 'fail midway' });
  let text = '';
  const err = await (async () => {
    for await (const chunk of stream) text += chunk.text ?? '';
  })().then(
    () => assert.fail(`the stream ended without an error: ${text}`),
    (e) => e,
  );
  assert.ok(err instanceof ApiError, `${err}`);
  assert.ok(err.status >= 500, err.message);
  assert.ok(text.length > 0, 'the text before the failure arrived');
});

test('streamGenerateContent without alt=sse is one JSON array of the same chunks', async () => {
  const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'As an array' }] }] });
  const headers = { 'content-type': 'application/json', 'x-goog-api-key': gatewayKey };
  const res = await fetch(`${gatewayURL}/v1beta/models/sim-chat:streamGenerateContent`, { method: 'POST', headers, body });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  const chunks = JSON.parse(await res.text());
  assert.ok(Array.isArray(chunks) && chunks.length > 2, `${chunks.length} chunks`);
  const text = chunks.map((c) => (c.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? '').join('')).join('');
  assert.equal(text, simAnswer('sim-chat', 'As an array'));
  assert.equal(chunks.at(-1).candidates[0].finishReason, 'STOP');
});

test('a chat with thoughts: the SDK keeps the history, thought parts and signatures included, and resends it', async () => {
  const chat = v1beta.chats.create({ model: 'sim-reasoning', config: { thinkingConfig: { includeThoughts: true } } });
  const first = await chat.sendMessage({ message: 'First thought' });
  const parts = first.candidates[0].content.parts;
  assert.ok(parts.some((p) => p.thought && p.text), `no thought part: ${JSON.stringify(parts)}`);
  assert.ok(parts.some((p) => p.thoughtSignature), `no thought signature: ${JSON.stringify(parts)}`);
  assert.equal(first.text, simAnswer('sim-reasoning', 'First thought'));
  assert.ok(first.usageMetadata.thoughtsTokenCount > 0, JSON.stringify(first.usageMetadata));

  const second = await chat.sendMessage({ message: 'Second thought' });
  assert.equal(second.text, simAnswer('sim-reasoning', 'Second thought'));
  assert.equal(chat.getHistory().length, 4);
});

test('a field the platform cannot honour is a 400 INVALID_ARGUMENT naming it', async () => {
  const body = await refusal(
    () => v1beta.models.generateContent({ model: 'sim-chat', contents: `${refusedMark}: logprobs`, config: { responseLogprobs: true } }),
    400,
    'INVALID_ARGUMENT',
  );
  assert.match(body.error.message, /responseLogprobs/);
});
