// The bare client against a real sluiced: decisions, batches, sluiced's refusals, timeouts,
// a missing daemon, the TCP listener, and the bounded keep-alive pool.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  Decision,
  SluiceClient,
  SluiceRequestError,
  SluiceUnavailableError,
} from '../src/index.js';
import { Daemon, closedPort, memoryConfig, sluicedBinary } from './daemon.js';

let serial = 0;
const fresh = (label) => `${label}-${process.pid}-${(serial += 1)}`;

const bin = sluicedBinary();

describe('SluiceClient against sluiced', { skip: bin === null }, () => {
  /** @type {Daemon} */ let daemon;
  /** @type {SluiceClient} */ let client;
  let httpPort;

  before(async () => {
    httpPort = await closedPort();
    daemon = await Daemon.start(bin, (socketPath) =>
      memoryConfig(socketPath).replace('http = ""', `http = "127.0.0.1:${httpPort}"`),
    );
    client = new SluiceClient({ socketPath: daemon.socketPath, timeoutMs: 2000 });
  });

  after(async () => {
    client?.close();
    await daemon?.cleanup();
  });

  it('decides, and gives the fields and headers of the answer', async () => {
    const key = fresh('decide');
    const first = await client.check('tiered', key, { cost: 2, tier: 'pro', endpoint: '/x' });
    assert.ok(first instanceof Decision);
    assert.equal(first.status, 200);
    assert.equal(first.allowed, true);
    assert.equal(first.limit, 10);
    assert.equal(first.remaining, 8);
    assert.equal(first.degraded, false);
    assert.equal(first.headers['X-RateLimit-Limit'], '10');
    assert.equal(first.headers['X-RateLimit-Remaining'], '8');
    assert.ok(first.reset > Date.now() / 1000 - 1);
    assert.equal(JSON.parse(first.body).remaining, 8);

    const denied = await client.check('tiered', key, { cost: 9, tier: 'pro' });
    assert.equal(denied.status, 429);
    assert.equal(denied.allowed, false);
    assert.equal(denied.error, 'rate_limit_exceeded');
    assert.ok(denied.retryAfter >= 1);
    assert.equal(denied.headers['Retry-After'], String(denied.retryAfter));
    assert.equal(denied.contentType, 'application/problem+json');
  });

  it('a batch is all-or-nothing', async () => {
    const a = fresh('batch-a');
    const b = fresh('batch-b');
    await client.check('fw', b, { cost: 3 });
    const denied = await client.checkBatch([
      { policy: 'fw', key: a },
      { policy: 'fw', key: b },
    ]);
    assert.equal(denied.status, 429);
    assert.equal(denied.results.length, 2);
    assert.equal(denied.results[0].allowed, true);
    assert.equal(denied.results[1].allowed, false);
    const peek = await client.check('fw', a, { cost: 0 });
    assert.equal(peek.remaining, 3, 'the allowed half of a denied batch consumed nothing');
  });

  it("sluiced's refusals are errors carrying its code", async () => {
    await assert.rejects(client.check('nope', 'k'), (error) => {
      assert.ok(error instanceof SluiceRequestError);
      assert.equal(error.status, 404);
      assert.equal(error.code, 'unknown_policy');
      return true;
    });
    await assert.rejects(client.check('fw', 'x'.repeat(600)), (error) => {
      assert.ok(error instanceof SluiceRequestError);
      assert.equal(error.code, 'bad_request');
      return true;
    });
    await assert.rejects(client.check('fw', ''), TypeError);
    await assert.rejects(client.check('fw', 'k', { cost: -1 }), TypeError);
    await assert.rejects(client.checkBatch([]), TypeError);
  });

  it('speaks to the TCP listener too', async () => {
    const tcp = new SluiceClient({ url: `http://127.0.0.1:${httpPort}`, timeoutMs: 2000 });
    try {
      const decision = await tcp.check('fw', fresh('tcp'));
      assert.equal(decision.remaining, 2);
    } finally {
      tcp.close();
    }
  });

  it('keeps its connections: many checks share at most maxSockets sockets', async () => {
    const pooled = new SluiceClient({
      socketPath: daemon.socketPath,
      maxSockets: 4,
      timeoutMs: 5000,
    });
    try {
      const before = daemon.connections();
      for (let round = 0; round < 5; round += 1) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, () => pooled.check('roomy', fresh('pool'))),
        );
        assert.ok(answers.every((d) => d.allowed));
      }
      const held = daemon.connections() - before;
      assert.ok(held >= 1 && held <= 4, `sluiced holds ${held} connections from the client`);
    } finally {
      pooled.close();
    }
  });

  it('a hung daemon: the call fails within its timeout, typed as unavailable', async () => {
    const quick = new SluiceClient({ socketPath: daemon.socketPath, timeoutMs: 50 });
    await daemon.pause();
    try {
      await assert.rejects(quick.check('fw', fresh('hung')), (error) => {
        assert.ok(error instanceof SluiceUnavailableError);
        assert.equal(error.reason, 'timeout');
        return true;
      });
    } finally {
      daemon.resume();
      quick.close();
    }
  });

  it('no daemon at the socket: a transport error; back once it is back', async () => {
    const warm = await client.check('roomy', fresh('warm'));
    assert.equal(warm.status, 200);
    await daemon.stop();
    await assert.rejects(client.check('fw', fresh('gone')), (error) => {
      assert.ok(error instanceof SluiceUnavailableError);
      assert.equal(error.reason, 'transport');
      return true;
    });
    await daemon.start();
    const back = await client.check('fw', fresh('back'));
    assert.equal(back.status, 200);
  });

  it('bounds the checks waiting for a connection', async () => {
    const tight = new SluiceClient({
      socketPath: daemon.socketPath,
      maxSockets: 1,
      maxPending: 2,
      timeoutMs: 2000,
    });
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 4 }, () => tight.check('roomy', fresh('tight'))),
      );
      const refused = results.filter((r) => r.status === 'rejected');
      assert.equal(refused.length, 2);
      for (const r of refused) assert.equal(r.reason.reason, 'overloaded');
    } finally {
      tight.close();
    }
  });
});

describe('SluiceClient options', () => {
  it('refuses bad options with a clear error', () => {
    assert.throws(() => new SluiceClient({ url: 'ftp://x' }), /http:\/\/HOST:PORT/);
    assert.throws(() => new SluiceClient({ maxSockets: 0 }), /maxSockets/);
    assert.throws(() => new SluiceClient({ timeoutMs: 0 }), /timeoutMs/);
  });

  it('times out after 50 ms unless told otherwise', () => {
    assert.equal(new SluiceClient().timeoutMs, 50);
    assert.equal(new SluiceClient({ timeoutMs: 20 }).timeoutMs, 20);
  });

  it('defaults to $SLUICE_SOCKET, else /tmp/sluiced.sock', () => {
    const saved = process.env.SLUICE_SOCKET;
    try {
      delete process.env.SLUICE_SOCKET;
      assert.equal(new SluiceClient().address, '/tmp/sluiced.sock');
      process.env.SLUICE_SOCKET = '/run/sluice/s.sock';
      assert.equal(new SluiceClient().address, '/run/sluice/s.sock');
    } finally {
      if (saved === undefined) delete process.env.SLUICE_SOCKET;
      else process.env.SLUICE_SOCKET = saved;
    }
  });
});
