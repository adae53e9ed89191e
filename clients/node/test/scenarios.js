// The cases every framework's middleware must pass, against a real sluiced and a real app
// listening on loopback. Each framework's test file builds the same routes its own way:
//   GET /limited      policy fw, key "k:<x-key>"                     (scope-wide middleware)
//   GET /strict       policy fw, key "k:<x-key>", failClosed
//   GET /who          policy fw, the default key (x-user sets req.user = {id}; trusted proxy)
//   GET /orders/:id   policy tiered, key "k:<x-key>", cost from x-cost, tier from x-tier
//   GET /custom       policy fw, key "k:<x-key>", onDenied answers 429 {"denied_by":"app"}
//   GET /passthrough  the fail-closed daemon's client, policy closed, key "k:<x-key>"
//   GET /degraded     the same client, policy opened (fail open), key "k:<x-key>"
// Every handler answers "ok".

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FailureLog, RATE_LIMIT_HEADERS, SluiceClient } from '../src/index.js';
import {
  Daemon,
  closedPort,
  failClosedConfig,
  memoryConfig,
  rawRequest,
  sluicedBinary,
} from './daemon.js';

const APP_TIMEOUT_MS = 500;
let serial = 0;
const fresh = (label) => `${label}-${process.pid}-${(serial += 1)}`;

/** The rate-limit headers of a fetch answer, as a plain object. */
function limitHeaders(res) {
  const out = {};
  for (const name of RATE_LIMIT_HEADERS) {
    const value = res.headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/**
 * @param {string} framework
 * @param {(ctx: {client: SluiceClient, closedClient: SluiceClient}) =>
 *   Promise<{url: string, close: () => Promise<void>}>} buildApp
 */
export function middlewareSuite(framework, buildApp) {
  const bin = sluicedBinary();
  describe(`${framework} middleware against sluiced`, { skip: bin === null }, () => {
    /** @type {Daemon} */ let daemon;
    /** @type {Daemon} */ let closedDaemon;
    /** @type {SluiceClient} */ let client;
    /** @type {SluiceClient} */ let closedClient;
    /** @type {SluiceClient} */ let direct;
    let app;
    const logLines = [];

    const get = async (path, headers = {}) => {
      const res = await fetch(`${app.url}${path}`, { headers });
      const body = Buffer.from(await res.arrayBuffer());
      return { status: res.status, headers: limitHeaders(res), res, body };
    };

    before(async () => {
      const redisPort = await closedPort();
      [daemon, closedDaemon] = await Promise.all([
        Daemon.start(bin, memoryConfig),
        Daemon.start(bin, failClosedConfig(redisPort)),
      ]);
      // 500 ms, not the default 50: a loaded CI machine must not turn a slow scheduler into a
      // fail-open answer the assertions do not expect. The default is checked in client.test.js.
      client = new SluiceClient({
        socketPath: daemon.socketPath,
        timeoutMs: APP_TIMEOUT_MS,
        failures: new FailureLog({ log: (line) => logLines.push(line) }),
      });
      // sluiced's fail-closed answer waits for its own backend timeout (50 ms): give it room.
      closedClient = new SluiceClient({ socketPath: closedDaemon.socketPath, timeoutMs: 2000 });
      direct = new SluiceClient({ socketPath: daemon.socketPath, timeoutMs: 2000 });
      app = await buildApp({ client, closedClient });
    });

    after(async () => {
      await app?.close();
      for (const c of [client, closedClient, direct]) c?.close();
      await Promise.all([daemon?.cleanup(), closedDaemon?.cleanup()]);
    });

    it('allowed answers carry the headers sluiced sent', async () => {
      const key = fresh('allowed');
      const res = await get('/limited', { 'x-key': key });
      assert.equal(res.status, 200);
      assert.equal(res.body.toString(), 'ok');
      const peek = await direct.check('fw', `k:${key}`, { cost: 0 });
      assert.equal(res.headers['X-RateLimit-Limit'], '3');
      assert.equal(res.headers['X-RateLimit-Remaining'], '2');
      assert.equal(res.headers['RateLimit-Policy'], peek.headers['RateLimit-Policy']);
      for (const name of ['X-RateLimit-Reset', 'RateLimit']) {
        assert.ok(res.headers[name], `${name} on an allowed answer`);
      }
      assert.equal(res.headers['Retry-After'], undefined);
    });

    it('a reached limit answers 429 with exactly the headers and body sluiced gave', async () => {
      const key = fresh('deny');
      for (const remaining of ['2', '1', '0']) {
        const res = await get('/limited', { 'x-key': key });
        assert.equal(res.status, 200);
        assert.equal(res.headers['X-RateLimit-Remaining'], remaining);
      }
      // A denial consumes nothing, so asking sluiced directly around the app's request gives the
      // same answer, unless a second ticks between two calls: one of the two then matches.
      const before = await direct.check('fw', `k:${key}`);
      const res = await get('/limited', { 'x-key': key });
      const afterwards = await direct.check('fw', `k:${key}`);
      assert.equal(res.status, 429);
      assert.equal(res.res.headers.get('content-type'), 'application/problem+json');
      assert.equal(before.status, 429);
      assert.ok(res.headers['Retry-After'], 'Retry-After on a denial');
      const same = (d) =>
        d.body.equals(res.body) && JSON.stringify(d.headers) === JSON.stringify(res.headers);
      assert.ok(
        same(before) || same(afterwards),
        `app answer ${res.body} ${JSON.stringify(res.headers)} ` +
          `vs sluiced ${before.body} ${JSON.stringify(before.headers)}`,
      );
      assert.equal(JSON.parse(res.body).error, 'rate_limit_exceeded');
    });

    it('another key keeps its quota', async () => {
      const spent = fresh('spent');
      for (let i = 0; i < 4; i += 1) await get('/limited', { 'x-key': spent });
      const res = await get('/limited', { 'x-key': fresh('other') });
      assert.equal(res.status, 200);
      assert.equal(res.headers['X-RateLimit-Remaining'], '2');
    });

    it('the default key is user:<id> when the framework knows the user', async () => {
      const user = fresh('user');
      const res = await get('/who', { 'x-user': user });
      assert.equal(res.status, 200);
      const peek = await direct.check('fw', `user:${user}`, { cost: 0 });
      assert.equal(peek.remaining, 2);
    });

    it('else ip:<address> as the framework resolves it behind its trusted proxy', async () => {
      const address = '203.0.113.7';
      const res = await get('/who', { 'x-forwarded-for': address });
      assert.equal(res.status, 200);
      assert.equal(res.headers['X-RateLimit-Remaining'], '2');
      const peek = await direct.check('fw', `ip:${address}`, { cost: 0 });
      assert.equal(peek.remaining, 2);
    });

    it('cost, tier and the route pattern as endpoint reach sluiced', async () => {
      const plain = await get('/orders/41', { 'x-key': fresh('cost'), 'x-cost': '2' });
      assert.equal(plain.status, 200);
      assert.equal(plain.headers['X-RateLimit-Limit'], '5');
      assert.equal(plain.headers['X-RateLimit-Remaining'], '3');
      const pro = await get('/orders/42', {
        'x-key': fresh('tier'),
        'x-cost': '3',
        'x-tier': 'pro',
      });
      assert.equal(pro.status, 200);
      assert.equal(pro.headers['X-RateLimit-Limit'], '10');
      assert.equal(pro.headers['X-RateLimit-Remaining'], '7');
      const metrics = (await rawRequest(daemon.socketPath, 'GET', '/metrics')).body.toString();
      const series = metrics
        .split('\n')
        .filter((l) => l.startsWith('rate_limit_requests_total') && l.includes('"tiered"'));
      assert.ok(
        series.some((l) => l.includes('endpoint="/orders/:id"') && l.includes('plan_tier="pro"')),
        `no tiered series with the route pattern: ${series.join('\n')}`,
      );
    });

    it('the app may replace the denial handler; the headers are still sent', async () => {
      const key = fresh('custom');
      for (let i = 0; i < 3; i += 1) await get('/custom', { 'x-key': key });
      const res = await get('/custom', { 'x-key': key });
      assert.equal(res.status, 429);
      assert.deepEqual(JSON.parse(res.body), { denied_by: 'app' });
      assert.equal(res.headers['X-RateLimit-Remaining'], '0');
      assert.ok(res.headers['Retry-After']);
    });

    it("sluiced's own 503 (fail-closed policy, backend down) is passed through", async () => {
      const key = fresh('closed');
      const res = await get('/passthrough', { 'x-key': key });
      const sluiced = await closedClient.check('closed', `k:${key}`);
      assert.equal(res.status, 503);
      assert.equal(sluiced.status, 503);
      assert.deepEqual(res.body, sluiced.body);
      assert.equal(res.headers['Retry-After'], sluiced.headers['Retry-After']);
      assert.deepEqual(res.headers, sluiced.headers);
      assert.equal(res.res.headers.get('content-type'), sluiced.contentType);
    });

    it("sluiced's degraded answer (fail-open policy, backend down) carries its header", async () => {
      const res = await get('/degraded', { 'x-key': fresh('degraded') });
      assert.equal(res.status, 200);
      assert.equal(res.body.toString(), 'ok');
      assert.equal(res.headers['X-RateLimit-Degraded'], '1');
    });

    it('a hung daemon: fail open after the timeout, counted and logged once', async () => {
      const failuresBefore = client.failures.total;
      await daemon.pause();
      try {
        const res = await get('/limited', { 'x-key': fresh('hung') });
        assert.equal(res.status, 200);
        assert.equal(res.body.toString(), 'ok');
        assert.deepEqual(res.headers, {});
        const closed = await get('/strict', { 'x-key': fresh('hung') });
        assert.equal(closed.status, 503);
      } finally {
        daemon.resume();
      }
      assert.equal(client.failures.total, failuresBefore + 2);
      assert.ok(logLines.length >= 1);
      assert.match(logLines[0], new RegExp(`within ${APP_TIMEOUT_MS} ms`));
    });

    it('a stopped daemon: fail open by default, 503 when configured closed', async () => {
      await daemon.stop();
      const failuresBefore = client.failures.total;
      const linesBefore = logLines.length;
      for (let i = 0; i < 5; i += 1) {
        const res = await get('/limited', { 'x-key': fresh('down') });
        assert.equal(res.status, 200);
        assert.equal(res.body.toString(), 'ok');
        assert.deepEqual(res.headers, {});
      }
      const closed = await get('/strict', { 'x-key': fresh('down') });
      assert.equal(closed.status, 503);
      assert.equal(closed.res.headers.get('retry-after'), '1');
      assert.equal(closed.res.headers.get('content-type'), 'application/json');
      assert.equal(JSON.parse(closed.body).error, 'rate_limiter_unavailable');
      assert.equal(client.failures.total, failuresBefore + 6);
      // One burst, one line at most (the hung-daemon case may already have written it).
      assert.ok(logLines.length - linesBefore <= 1, logLines.join('\n'));
    });

    it('a restarted daemon on the same socket: the next request works, app untouched', async () => {
      await daemon.start();
      const failures = client.failures.total;
      const res = await get('/limited', { 'x-key': fresh('back') });
      assert.equal(res.status, 200);
      assert.equal(res.headers['X-RateLimit-Remaining'], '2');
      assert.equal(client.failures.total, failures);
    });
  });
}
