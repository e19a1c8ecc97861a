// Shared setup for the node tests: a client pointed at the modelgate the Go test started.
import OpenAI from 'openai';

export const gatewayURL = process.env.MODELGATE_URL;
export const gatewayKey = process.env.MODELGATE_KEY;
if (!gatewayURL || !gatewayKey) {
  throw new Error('MODELGATE_URL and MODELGATE_KEY must be set; run these tests through the Go test TestNodeClient');
}

// A second key of the same team, and a key of another team (set by TestNodeClient).
export const sameTeamKey = process.env.MODELGATE_KEY_ALPHA2;
export const otherTeamKey = process.env.MODELGATE_KEY_BETA;

export function client(apiKey = gatewayKey) {
  return new OpenAI({ baseURL: `${gatewayURL}/v1`, apiKey, maxRetries: 0, timeout: 20_000 });
}

// The simulated platform answers a plain prompt with this text.
export function simAnswer(upstreamModel, prompt) {
  return `Hello from ${upstreamModel}. You said: ${prompt}`;
}

// Two functions the simulated platform calls in parallel when the prompt asks for it.
export const weatherTools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: {
        type: 'object',
        properties: { timezone: { type: 'string' }, hours: { type: 'integer' } },
        required: ['timezone', 'hours'],
      },
    },
  },
];
