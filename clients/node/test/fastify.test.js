// The shared middleware cases on a real Fastify app listening on loopback.

import Fastify from 'fastify';
import { sluiceFastify, sluiceFastifyHook } from '../src/index.js';
import { middlewareSuite } from './scenarios.js';

const keyed = (request) => `k:${request.headers['x-key']}`;

middlewareSuite('fastify', async ({ client, closedClient }) => {
  // request.ip then names the X-Forwarded-For entry a loopback proxy added.
  const app = Fastify({ trustProxy: '127.0.0.1' });
  // Stands in for @fastify/passport: sets request.user.
  app.addHook('onRequest', (request, _reply, done) => {
    const id = request.headers['x-user'];
    if (id) request.user = { id };
    done();
  });
  const ok = async () => 'ok';
  // The plugin form, in a scope of its own so it guards only the routes registered there.
  await app.register(async (scope) => {
    scope.register(sluiceFastify, { client, policy: 'fw', key: keyed });
    scope.get('/limited', ok);
  });
  // The per-route form.
  const guard = (options) => ({ onRequest: sluiceFastifyHook(options) });
  app.get('/strict', guard({ client, policy: 'fw', key: keyed, failClosed: true }), ok);
  app.get('/who', guard({ client, policy: 'fw' }), ok);
  app.get(
    '/orders/:id',
    guard({
      client,
      policy: 'tiered',
      key: keyed,
      cost: (request) => Number(request.headers['x-cost'] ?? 1),
      tier: (request) => request.headers['x-tier'],
    }),
    ok,
  );
  app.get(
    '/custom',
    guard({
      client,
      policy: 'fw',
      key: keyed,
      onDenied: (_request, reply) => reply.code(429).send({ denied_by: 'app' }),
    }),
    ok,
  );
  app.get('/passthrough', guard({ client: closedClient, policy: 'closed', key: keyed }), ok);
  app.get('/degraded', guard({ client: closedClient, policy: 'opened', key: keyed }), ok);

  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
});
