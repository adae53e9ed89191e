// Charges: the client's charge() against a real sluiced, and the Express and Fastify
// middlewares charging what an OpenAI-compatible upstream reported, after the response and
// without delaying it.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { FailureLog, OpenAIUsage, SluiceClient, SluiceRequestError } from '../src/index.js';
import { Daemon, sluicedBinary, usageConfig } from './daemon.js';
import { Hold, JSON_BODY, SSE_BODY, SSE_EVENTS, TOKENS, UPSTREAMS, waitCharges } from './upstream.js';

const bin = sluicedBinary();

describe('charges against sluiced', { skip: bin === null }, () => {
  /** @type {Daemon} */ let daemon;
  beforeEach(async () => {
    daemon = await Daemon.start(bin, usageConfig);
  });
  afterEach(async () => {
    await daemon?.cleanup();
  });

  it('charge() debits into debt, refunds, and is refused on a policy that is not a usage one', async () => {
    const client = new SluiceClient({ socketPath: daemon.socketPath, timeoutMs: 5000 });
    const got = [];
    for (let i = 0; i < 3; i += 1) got.push(await client.charge('tokens', 'user:1', 40));
    assert.deepEqual(
      got.map((d) => [d.status, d.remaining, d.debt, d.allowed]),
      [
        [200, 60, 0, true],
        [200, 20, 0, true],
        [200, 0, 20, false],
      ],
    );
    const ask = await client.check('tokens', 'user:1');
    assert.deepEqual([ask.status, ask.debt], [429, 20]);
    const refund = await client.charge('tokens', 'user:1', -30, { tier: undefined });
    assert.deepEqual([refund.allowed, refund.remaining, refund.debt], [true, 10, 0]);
    await assert.rejects(client.charge('plain', 'user:1', 40), (error) => {
      assert.ok(error instanceof SluiceRequestError);
      assert.equal(error.status, 400);
      assert.match(error.detail, /usage/);
      return true;
    });
    await assert.rejects(client.charge('tokens', 'user:1', 1.5), TypeError);
    client.close();
  });

  for (const framework of Object.keys(UPSTREAMS)) {
    describe(framework, () => {
      let client;
      let app;
      const hold = new Hold();
      const lines = [];
      const get = async (path, user) => {
        const res = await fetch(`${app.url}${path}`, { headers: { 'x-user': user } });
        return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()).toString() };
      };
      beforeEach(async () => {
        lines.length = 0;
        client = new SluiceClient({
          socketPath: daemon.socketPath,
          timeoutMs: 5000,
          failures: new FailureLog({ log: (line) => lines.push(line) }),
        });
        app = await UPSTREAMS[framework](client, hold);
      });
      afterEach(async () => {
        await app?.close();
        client?.close();
      });

      for (const [path, body] of [
        ['/json', JSON_BODY],
        ['/sse', SSE_BODY],
      ]) {
        it(`a budget of 100, 40 tokens a ${path.slice(1)} answer: requests 1-3 pass, the 4th is denied`, async () => {
          for (let n = 1; n <= 3; n += 1) {
            const res = await get(path, 'budget');
            assert.deepEqual([res.status, res.body], [200, body], `request ${n}`);
            await waitCharges(client, n, 0);
          }
          const denied = await get(path, 'budget');
          assert.equal(denied.status, 429);
          assert.ok(Number(denied.headers.get('retry-after')) >= 1);
        });
      }

      it('the charge does not delay the response', async () => {
        hold.arm();
        const answer = get('/sse', 'held');
        // The check is answered (the request reached its handler); then sluiced stops
        // answering anything, so the charge cannot complete until it is resumed.
        await hold.entered;
        await daemon.pause();
        hold.release();
        try {
          const res = await answer;
          assert.deepEqual([res.status, res.body], [200, SSE_BODY]);
          // The whole answer arrived while its charge was still waiting for sluiced.
          assert.deepEqual([client.charges, client.chargeFailures.total], [0, 0]);
        } finally {
          daemon.resume();
        }
        await waitCharges(client, 1, 0);
        const peek = await client.check('tokens', 'user:held');
        assert.equal(peek.remaining, 100 - TOKENS);
      });

      it('with sluiced stopped the request succeeds and the lost charge is counted', async () => {
        await daemon.stop();
        const res = await get('/json', 'stopped');
        assert.deepEqual([res.status, res.body], [200, JSON_BODY]);
        await waitCharges(client, 0, 1);
        assert.equal(client.failures.total, 1);
        assert.ok(lines.some((line) => line.includes('charge(s) failed')), lines.join('\n'));
      });
    });
  }
});

describe('OpenAIUsage', () => {
  const sse = SSE_EVENTS.join('');
  const cases = [
    ['json', JSON_BODY, 40],
    ['json after whitespace', `\n  ${JSON_BODY}`, 40],
    ['json without usage', '{"choices":[]}', undefined],
    ['json cut short', JSON_BODY.slice(0, 50), undefined],
    ['json over 1 MiB', `{"usage":{"total_tokens":7},"pad":"${'x'.repeat(1 << 20)}"}`, undefined],
    ['sse', sse, 40],
    ['sse with CRLF', sse.replaceAll('\n', '\r\n'), 40],
    ['sse ending without an empty line', 'data: {"usage":{"total_tokens":9}}', 9],
    ['sse, the last usage wins', 'data: {"usage":{"total_tokens":5}}\n\ndata: {"usage":{"total_tokens":6}}\n\n', 6],
    ['sse data on two lines', 'data: {"usage":\ndata: {"total_tokens":3}}\n\n', 3],
    ['sse without usage', ': keep-alive\n\ndata: {"choices":[]}\n\ndata: [DONE]\n\n', undefined],
  ];
  for (const [name, body, want] of cases) {
    it(name, () => {
      const bytes = Buffer.from(body);
      for (const step of [bytes.length + 1, 7, 1]) {
        const meter = new OpenAIUsage();
        for (let i = 0; i < bytes.length; i += step) meter.write(bytes.subarray(i, i + step));
        assert.equal(meter.amount(200, {}), want, `pieces of ${step}`);
      }
    });
  }
});
