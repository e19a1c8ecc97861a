// Helpers for the Responses WebSocket mode tests: a ResponsesWS from the official openai
// package, driven one turn at a time, with a record of every frame the client put on the wire.
import { WebSocket } from 'ws';
import { ResponsesWS } from 'openai/resources/responses/ws';

import { client } from './client.mjs';

// The frames the ws package sent, per socket: the SDK serializes each message itself, so
// this is what crossed the wire, not what the test passed in.
const sentFrames = new WeakMap();
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function sendRecorded(data, ...rest) {
  if (!sentFrames.has(this)) sentFrames.set(this, []);
  sentFrames.get(this).push(String(data));
  return send.call(this, data, ...rest);
};

const terminalTypes = new Set(['response.completed', 'response.incomplete', 'response.failed', 'error']);

// A connection that serves one turn at a time: turn(message) sends it and resolves with the
// turn's events once its last one (a terminal response event or an error event) arrives.
export class Socket {
  constructor(apiKey) {
    this.ws = new ResponsesWS(client(apiKey));
    this.errors = []; // the SDK's WebSocketError for each error event; unhandled it would reject
    this.closed = new Promise((resolve) => this.ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
    this.ws.on('error', (err) => {
      this.errors.push(err);
      if (!err.error) this.#fail(err); // a transport failure, not an error event
    });
    this.stray = []; // events that came outside any turn
    this.ws.on('event', (ev) => {
      if (!this.pending) {
        this.stray.push(ev);
        return;
      }
      this.pending.events.push(ev);
      if (terminalTypes.has(ev.type)) this.#settle();
    });
    this.closed.then(({ code }) => this.#fail(new Error(`the socket closed (${code}) during a turn`)));
  }

  turn(message) {
    if (this.pending) throw new Error('one turn at a time');
    return new Promise((resolve, reject) => {
      this.pending = { events: [], resolve, reject };
      this.ws.send(message);
    });
  }

  // The frames this connection sent so far, parsed.
  sent() {
    return (sentFrames.get(this.ws.socket.platformSocket) ?? []).map((f) => JSON.parse(f));
  }

  close() {
    this.ws.close({ code: 1000, reason: 'done' });
    return this.closed;
  }

  #settle() {
    const { events, resolve } = this.pending;
    this.pending = undefined;
    const last = events.at(-1);
    resolve({ events, last, response: last.type === 'error' ? undefined : last.response });
  }

  #fail(err) {
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(err);
  }
}

// The function tools of the tool loop, in the Responses shape.
export const loopTools = [
  {
    type: 'function',
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
  {
    type: 'function',
    name: 'get_time',
    description: 'Current time in a timezone',
    parameters: { type: 'object', properties: { timezone: { type: 'string' } }, required: ['timezone'] },
  },
];
