// An OpenAI-compatible upstream in Express and in Fastify, behind the middleware with
// `charge: openAIUsage`: GET /json answers a completion, GET /sse streams it as server-sent
// events (usage in the last chunk before [DONE]), each using TOKENS tokens. Requests are keyed
// user:<x-user>; a Hold stops the next request in its handler (after its check) until released.

import { Readable } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import sluice, { openAIUsage, sluiceFastify } from '../src/index.js';

export const TOKENS = 40;
export const JSON_BODY =
  '{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",' +
  '"content":"Hello"}}],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":40}}';
export const SSE_EVENTS = [
  'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}],"usage":null}\n\n',
  'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}\n\n',
  'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":15,"completion_tokens":25,"total_tokens":40}}\n\n',
  'data: [DONE]\n\n',
];
export const SSE_BODY = SSE_EVENTS.join('');

export class Hold {
  #armed = false;
  #release = () => {};
  /** Resolves when the held request has reached its handler. */
  entered = Promise.resolve();
  #enter = () => {};

  arm() {
    this.#armed = true;
    this.entered = new Promise((resolve) => {
      this.#enter = resolve;
    });
  }

  release() {
    this.#release();
  }

  /** In a handler: waits while armed (once). */
  wait() {
    if (!this.#armed) return Promise.resolve();
    this.#armed = false;
    const released = new Promise((resolve) => {
      this.#release = resolve;
    });
    this.#enter();
    return released;
  }
}

const userOf = (headers) => `user:${headers['x-user'] ?? 'none'}`;

async function expressUpstream(client, hold) {
  const app = express();
  app.use(sluice.express({ client, policy: 'tokens', key: (req) => userOf(req.headers), charge: openAIUsage }));
  app.get('/json', async (_req, res) => {
    await hold.wait();
    res.type('application/json').send(JSON_BODY);
  });
  app.get('/sse', async (_req, res) => {
    await hold.wait();
    res.type('text/event-stream');
    for (const event of SSE_EVENTS) res.write(event);
    res.end();
  });
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function fastifyUpstream(client, hold) {
  const app = Fastify();
  app.register(sluiceFastify, {
    client,
    policy: 'tokens',
    key: (request) => userOf(request.headers),
    charge: openAIUsage,
  });
  app.get('/json', async (_request, reply) => {
    await hold.wait();
    reply.header('content-type', 'application/json');
    return JSON_BODY;
  });
  app.get('/sse', async (_request, reply) => {
    await hold.wait();
    reply.header('content-type', 'text/event-stream');
    return reply.send(Readable.from(SSE_EVENTS));
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
}

export const UPSTREAMS = { express: expressUpstream, fastify: fastifyUpstream };

/** Waits (10 s at most) until the client's middlewares sent exactly this many charges. */
export async function waitCharges(client, charges, failures) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const got = [client.charges, client.chargeFailures.total];
    if (got[0] === charges && got[1] === failures) return;
    if (got[0] > charges || got[1] > failures || Date.now() > deadline) {
      throw new Error(`charges ${got[0]}, lost ${got[1]}; want ${charges} and ${failures}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
