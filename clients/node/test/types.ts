// The package's types as a TypeScript app uses them, checked by `tsc --noEmit` (test.sh): the
// package resolves by its own name through package.json's "exports", so this is what an app
// that installed it compiles against. Never run: a wrong declaration fails the compile.

import http from 'node:http';
import Fastify from 'fastify';
import sluice, {
  Decision,
  FailureLog,
  OpenAIUsage,
  RATE_LIMIT_HEADERS,
  SluiceClient,
  SluiceRequestError,
  SluiceUnavailableError,
  sluiceExpress,
  sluiceFastify,
  sluiceFastifyHook,
  openAIUsage,
  type Check,
  type Meter,
  type ClientOptions,
  type RateLimitHeader,
} from '@sluice/client';

const options: ClientOptions = { socketPath: '/tmp/sluiced.sock', timeoutMs: 50, maxSockets: 16 };
const client: SluiceClient = new sluice.Client(options);
const tcp = new SluiceClient({ url: 'http://127.0.0.1:8080', failures: new FailureLog({ intervalMs: 1000 }) });

async function decide(): Promise<number | undefined> {
  const d: Decision = await client.check('public', 'user:1', { cost: 1, tier: 'pro', endpoint: '/orders' });
  const status: 200 | 429 | 503 = d.status;
  const header: string | undefined = d.headers['Retry-After'];
  const checks: Check[] = [{ policy: 'public', key: 'user:1' }, { policy: 'search', key: 'user:1', cost: 5 }];
  const batch = await tcp.checkBatch(checks, { timeoutMs: 100 });
  const remaining: number[] = (batch.results ?? []).map((r) => r.remaining);
  void status;
  void header;
  void remaining;
  return d.allowed ? d.remaining : d.retryAfter;
}

function classify(err: unknown): string {
  if (err instanceof SluiceUnavailableError) return err.reason;
  if (err instanceof SluiceRequestError) return `${err.status} ${err.code}: ${err.detail}`;
  return 'other';
}

const names: readonly RateLimitHeader[] = RATE_LIMIT_HEADERS;

// Express's middleware shape, on node's own server (express ships no types of its own).
const limit = sluiceExpress({
  client,
  policy: 'public',
  cost: (req) => (req.method === 'POST' ? 2 : 1),
  tier: (req) => req.headers['x-plan'] as string | undefined,
  key: (req) => `ip:${req.socket.remoteAddress ?? ''}`,
  onDenied: (_req, res, _next, decision) => {
    res.statusCode = 429;
    res.end(decision.body);
  },
});
const failures: number = limit.failures.total;
http.createServer((req, res) => limit(req, res, () => res.end('ok')));

// Fastify's own types against the plugin and the hook.
const fastify = Fastify();
fastify.register(sluiceFastify, { client, policy: 'public', failClosed: true });
fastify.get('/search', { onRequest: sluiceFastifyHook({ client, policy: 'search', cost: 5 }) }, async () => 'ok');

// Usage budgets: a charge, and the middlewares' charge option.
async function charge(): Promise<number> {
  const d: Decision = await client.charge('llm_tokens', 'user:1', 1830, { tier: 'pro' });
  const lost: number = client.chargeFailures.total + client.charges;
  return (d.debt ?? 0) + lost;
}
const byHeader = (): Meter => ({
  write: () => undefined,
  amount: (_status, headers) => Number(headers['x-tokens'] ?? 0),
});
fastify.register(sluiceFastify, { client, policy: 'llm_tokens', charge: openAIUsage });
http.createServer((req, res) =>
  sluiceExpress({ client, policy: 'llm_tokens', charge: sluice.openAIUsage })(req, res, () => res.end('ok')),
);
const meter: Meter = new OpenAIUsage();
fastify.get('/v1/tokens', { onRequest: sluiceFastifyHook({ client, policy: 'llm_tokens', charge: byHeader }) }, async () => 'ok');

void charge;
void meter;
void decide;
void classify;
void names;
void failures;
