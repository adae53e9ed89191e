// The shared middleware cases on a real Express app listening on loopback.

import express from 'express';
import sluice from '../src/index.js';
import { middlewareSuite } from './scenarios.js';

const keyed = (req) => `k:${req.get('x-key')}`;

middlewareSuite('express', async ({ client, closedClient }) => {
  const app = express();
  // req.ip then names the X-Forwarded-For entry a loopback proxy added.
  app.set('trust proxy', 'loopback');
  // Stands in for passport: sets req.user.
  app.use((req, _res, next) => {
    const id = req.get('x-user');
    if (id) req.user = { id };
    next();
  });
  app.use('/limited', sluice.express({ client, policy: 'fw', key: keyed }));
  const ok = (_req, res) => res.type('text').send('ok');
  app.get('/limited', ok);
  app.get('/strict', sluice.express({ client, policy: 'fw', key: keyed, failClosed: true }), ok);
  app.get('/who', sluice.express({ client, policy: 'fw' }), ok);
  app.get(
    '/orders/:id',
    sluice.express({
      client,
      policy: 'tiered',
      key: keyed,
      cost: (req) => Number(req.get('x-cost') ?? 1),
      tier: (req) => req.get('x-tier'),
    }),
    ok,
  );
  app.get(
    '/custom',
    sluice.express({
      client,
      policy: 'fw',
      key: keyed,
      onDenied: (_req, res) => res.status(429).json({ denied_by: 'app' }),
    }),
    ok,
  );
  app.get('/passthrough', sluice.express({ client: closedClient, policy: 'closed', key: keyed }), ok);
  app.get('/degraded', sluice.express({ client: closedClient, policy: 'opened', key: keyed }), ok);

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
});
