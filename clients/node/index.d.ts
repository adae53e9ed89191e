// Types of @sluice/client (the code is plain ESM JavaScript under src/).

import type { IncomingMessage, ServerResponse } from 'node:http';

/** The headers sluiced sends for its client, in the spelling the middleware writes them. */
export declare const RATE_LIMIT_HEADERS: readonly [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'X-RateLimit-Degraded',
];
export type RateLimitHeader = (typeof RATE_LIMIT_HEADERS)[number];

export interface CheckOptions {
  /** Units this request consumes (default 1; 0 = peek). */
  cost?: number;
  /** A tier of the policy (`tiers` in sluiced's config). */
  tier?: string;
  /** The metrics label of the endpoint. */
  endpoint?: string;
  /** This call's timeout in milliseconds (default: the client's). */
  timeoutMs?: number;
}

export interface Check {
  policy: string;
  key: string;
  cost?: number;
  tier?: string;
  endpoint?: string;
}

/** One check's result inside a batch answer, as sluiced sent it. */
export interface CheckResult {
  allowed: boolean;
  policy: string;
  limit: number;
  remaining: number;
  reset: number;
  retry_after?: number;
  delay_ms?: number;
  degraded?: boolean;
  error?: string;
  message?: string;
  [field: string]: unknown;
}

/** sluiced's answer to one check or one batch. */
export declare class Decision {
  /** 200 allowed, 429 denied, 503 sluiced's own fail-closed answer. */
  readonly status: 200 | 429 | 503;
  readonly allowed: boolean;
  readonly limit: number | undefined;
  readonly remaining: number | undefined;
  /** Unix seconds when the key is back to full. */
  readonly reset: number | undefined;
  /** Whole seconds until a request of this cost could pass (denials only). */
  readonly retryAfter: number | undefined;
  /** leaky_bucket only: how long to wait before going on. */
  readonly delayMs: number | undefined;
  /** sluiced's backend failed and the policy fails open. */
  readonly degraded: boolean;
  /** The rate-limit headers sluiced sent, to copy as they are. */
  readonly headers: Partial<Record<RateLimitHeader, string>>;
  /** The Content-Type sluiced sent (application/problem+json on a 429). */
  readonly contentType: string;
  /** sluiced's body bytes. */
  readonly body: Buffer;
  /** sluiced's body, parsed. */
  readonly json: Record<string, unknown>;
  /** A batch's per-check results, in the order asked. */
  readonly results: CheckResult[] | undefined;
  /** sluiced's error code on a 429 or 503. */
  readonly error: string | undefined;
  /** What a key of a usage policy owes beyond its limit (0 when nothing); undefined otherwise. */
  readonly debt: number | undefined;
}

export declare class SluiceError extends Error {}

/** sluiced could not be reached, did not answer in time, or gave an undocumented answer. */
export declare class SluiceUnavailableError extends SluiceError {
  readonly reason: 'timeout' | 'transport' | 'bad_answer' | 'overloaded';
}

/** sluiced refused the check (400 bad_request, 404 unknown_policy, ...). */
export declare class SluiceRequestError extends SluiceError {
  readonly status: number;
  /** sluiced's `error` code. */
  readonly code: string;
  /** sluiced's `message`. */
  readonly detail: string;
}

/** Counts failed middleware checks and logs them at most once per interval (default 10 s). */
export declare class FailureLog {
  /** `what` names what failed in the log line (default "rate-limit check(s)"). */
  constructor(options?: { intervalMs?: number; log?: (line: string) => void; what?: string });
  /** Failures since this log was made. */
  readonly total: number;
  /** The function lines are written to. */
  readonly log: (line: string) => void;
  record(error: unknown, outcome: string): void;
}

/**
 * What a middleware's `charge` option returns for one request: it is given each piece of the
 * response body as that piece is written to the client, then asked, once the response has
 * been sent, what the response used.
 */
export interface Meter {
  write(chunk: Uint8Array): void;
  /** What the finished response used; undefined, null or 0 charges nothing. */
  amount(status: number, headers: Record<string, unknown>): number | undefined | null;
}

/**
 * The meter of an OpenAI-compatible upstream: usage.total_tokens of a JSON answer, or of the
 * last `data:` event carrying usage in a streamed (text/event-stream) one.
 */
export declare class OpenAIUsage implements Meter {
  write(chunk: Uint8Array): void;
  amount(status: number, headers: Record<string, unknown>): number | undefined;
}

/** A middleware's `charge` option for an OpenAI-compatible upstream: a new OpenAIUsage per request. */
export declare function openAIUsage(req?: unknown): OpenAIUsage;

export interface ClientOptions {
  /** Unix socket of sluiced (default: $SLUICE_SOCKET, else /tmp/sluiced.sock). */
  socketPath?: string;
  /** Instead of the socket: sluiced's TCP listener, `http://127.0.0.1:8080`. */
  url?: string;
  /** Per-call timeout in milliseconds (default 50). */
  timeoutMs?: number;
  /** Most connections kept to sluiced (default 16). */
  maxSockets?: number;
  /** Most calls in flight or waiting for a connection; past it a call fails at once (default 1024). */
  maxPending?: number;
  /** Where the middleware counts and logs failed checks (default: a FailureLog to stderr). */
  failures?: FailureLog;
  /** Where the middleware counts and logs lost charges (default: a FailureLog to `failures`' log). */
  chargeFailures?: FailureLog;
}

export declare class SluiceClient {
  constructor(options?: ClientOptions);
  /** The socket path or http origin this client talks to. */
  readonly address: string;
  readonly timeoutMs: number;
  /** Failed middleware checks: counted, and logged once per burst. */
  readonly failures: FailureLog;
  /** The middlewares' lost charges (the responses were served): counted, and logged once per burst. */
  readonly chargeFailures: FailureLog;
  /** The middlewares' charges sluiced answered. */
  readonly charges: number;
  check(policy: string, key: string, options?: CheckOptions): Promise<Decision>;
  /**
   * Charges `amount` (what a request used; negative refunds) to `key` of a usage policy. The
   * Decision's `allowed` says whether the key still has room for a request, `debt` what it owes.
   */
  charge(policy: string, key: string, amount: number, options?: { tier?: string; timeoutMs?: number }): Promise<Decision>;
  /** All-or-nothing: if any check is denied none consumes. 1 to 64 checks. */
  checkBatch(checks: Check[], options?: { timeoutMs?: number }): Promise<Decision>;
  /** Closes the pooled connections. */
  close(): void;
}

type PerRequest<Req, T> = T | ((req: Req) => T);

export interface MiddlewareOptions<Req> {
  client: SluiceClient;
  policy: string;
  /** The rate-limited key (default `user:<req.user.id>`, else `ip:<req.ip>`). */
  key?: (req: Req) => string | Promise<string>;
  cost?: PerRequest<Req, number>;
  tier?: PerRequest<Req, string | undefined>;
  /** Metrics label (default: the route pattern, else the path). */
  endpoint?: PerRequest<Req, string>;
  /** Answer 503 when sluiced cannot be asked (default: fail open). */
  failClosed?: boolean;
  /** This middleware's timeout per check, in milliseconds (default: the client's). */
  timeoutMs?: number;
  /**
   * For a usage policy: a meter for each request the app serves (allowed, or let through by a
   * failed check), whose amount is charged to the request's key and tier once the response has
   * been sent, never delaying it nor failing it (`openAIUsage`: an OpenAI-compatible upstream).
   */
  charge?: (req: Req) => Meter | undefined | null;
}

type ExpressRequest = IncomingMessage & { ip?: string; user?: { id?: unknown } } & Record<string, any>;
type ExpressResponse = ServerResponse & Record<string, any>;
type ExpressNext = (error?: unknown) => void;

export interface ExpressOptions extends MiddlewareOptions<ExpressRequest> {
  /** Replaces the 429 answer; the rate-limit headers are already set on `res`. */
  onDenied?: (req: ExpressRequest, res: ExpressResponse, next: ExpressNext, decision: Decision) => void;
}

export type ExpressMiddleware = ((req: ExpressRequest, res: ExpressResponse, next: ExpressNext) => void) & {
  readonly failures: FailureLog;
};

export declare function sluiceExpress(options: ExpressOptions): ExpressMiddleware;

type FastifyRequestLike = { ip: string; url: string; headers: Record<string, unknown> } & Record<string, any>;
type FastifyReplyLike = Record<string, any>;

export interface FastifyOptions extends MiddlewareOptions<FastifyRequestLike> {
  /** Replaces the 429 answer; it must send the reply. The rate-limit headers are already set. */
  onDenied?: (request: FastifyRequestLike, reply: FastifyReplyLike, decision: Decision) => void;
}

export type FastifyOnRequestHook = (
  request: FastifyRequestLike,
  reply: FastifyReplyLike,
  done: (error?: Error) => void,
) => void;

/** `fastify.register(sluiceFastify, {client, policy: "public"})`. */
export declare function sluiceFastify(
  fastify: any,
  options: FastifyOptions,
  done: (error?: Error) => void,
): void;

/** An onRequest hook for one route: `{onRequest: sluiceFastifyHook({client, policy})}`. */
export declare function sluiceFastifyHook(options: FastifyOptions): FastifyOnRequestHook;

declare const sluice: {
  readonly Client: typeof SluiceClient;
  readonly express: typeof sluiceExpress;
  readonly fastify: typeof sluiceFastify;
  readonly fastifyHook: typeof sluiceFastifyHook;
  readonly openAIUsage: typeof openAIUsage;
};
export default sluice;
