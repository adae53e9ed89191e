// The app the benchmark loads: one route with the middleware, the same route without it.
// Run as `node bench/app.js express|fastify SOCKET`; prints its port on stdout once listening.

import express from 'express';
import Fastify from 'fastify';
import sluice, { SluiceClient } from '../src/index.js';

const [framework, socketPath] = process.argv.slice(2);
const client = new SluiceClient({ socketPath });
const options = { client, policy: 'roomy' };

// The time of each check as the middleware sees it, read and reset by GET /stats: the bare call
// measured inside the app under the load generator, next to the bench's own bare calls.
const times = [];
const check = client.check.bind(client);
client.check = async (...args) => {
  const start = process.hrtime.bigint();
  try {
    return await check(...args);
  } finally {
    if (times.length < 1_000_000) times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
};
const stats = () => {
  const sorted = times.splice(0).sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return JSON.stringify({ n: sorted.length, mean, p50: sorted[sorted.length >> 1] ?? 0 });
};

let port;
if (framework === 'express') {
  const app = express();
  app.get('/plain', (_req, res) => res.send('ok'));
  app.get('/stats', (_req, res) => res.type('json').send(stats()));
  app.get('/limited', sluice.express(options), (_req, res) => res.send('ok'));
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  port = server.address().port;
} else if (framework === 'fastify') {
  const app = Fastify();
  app.get('/plain', async () => 'ok');
  app.get('/stats', async (_request, reply) => reply.type('application/json').send(stats()));
  app.get('/limited', { onRequest: sluice.fastifyHook(options) }, async () => 'ok');
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = app.server.address().port;
} else {
  console.error('usage: node bench/app.js express|fastify SOCKET');
  process.exit(2);
}
process.stdout.write(`${port}\n`);
// The benchmark reads the failure count at the end: a check that failed would make "with" cheap.
process.on('SIGTERM', () => {
  console.error(`failed checks: ${client.failures.total}`);
  process.exit(0);
});
