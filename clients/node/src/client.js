// The client of sluiced's check API (`POST /v1/check`) over its Unix socket or TCP listener.
// Node's own http module speaks HTTP/1.1 over a Unix socket, so nothing else is needed: a
// keep-alive Agent with a bounded number of sockets is the connection pool, and every call is
// bounded by a timeout so a stopped or hung daemon costs a request at most that long.

import http from 'node:http';
import { SluiceRequestError, SluiceUnavailableError } from './errors.js';
import { FailureLog } from './failures.js';

/** The headers sluiced sends for its client, in the spelling the middleware writes them. */
export const RATE_LIMIT_HEADERS = Object.freeze([
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'X-RateLimit-Degraded',
]);
const HEADER_NAMES = RATE_LIMIT_HEADERS.map((name) => [name.toLowerCase(), name]);

const DEFAULT_SOCKET = '/tmp/sluiced.sock';
const DEFAULT_TIMEOUT_MS = 50;
const DEFAULT_MAX_SOCKETS = 16;
const DEFAULT_MAX_PENDING = 1024;
/** sluiced's bodies are a few hundred bytes; a batch of 64 stays far below this. */
const MAX_ANSWER_BYTES = 1 << 20;
const MAX_BATCH = 64;
const CHECK_PATH = '/v1/check';
const CHARGE_PATH = '/v1/charge';
/** Statuses whose body is a decision (or sluiced's fail-closed 503), not an error. */
const DECISION_STATUSES = new Set([200, 429, 503]);
/** A failure on a reused keep-alive socket before any answer: the daemon closed it. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** sluiced's answer to one check or one batch. */
export class Decision {
  /**
   * @param {number} status
   * @param {http.IncomingHttpHeaders} rawHeaders
   * @param {Buffer} body
   * @param {any} json
   */
  constructor(status, rawHeaders, body, json) {
    /** 200 allowed, 429 denied, 503 sluiced's fail-closed answer. */
    this.status = status;
    // A charge answers 200 with allowed false when it left the key without room.
    this.allowed = status === 200 && json.allowed !== false;
    /** @type {Record<string, string>} the rate-limit headers sluiced sent, to copy as they are */
    this.headers = {};
    for (const [lower, name] of HEADER_NAMES) {
      const value = rawHeaders[lower];
      if (typeof value === 'string') this.headers[name] = value;
    }
    this.contentType = rawHeaders['content-type'] ?? 'application/json';
    /** sluiced's body bytes, sent as they are on a denial or a 503. */
    this.body = body;
    this.json = json;
    this.limit = json.limit;
    this.remaining = json.remaining;
    this.reset = json.reset;
    this.retryAfter = json.retry_after;
    this.delayMs = json.delay_ms;
    this.degraded = json.degraded === true || this.headers['X-RateLimit-Degraded'] === '1';
    /** A batch's per-check results, in the order asked; undefined for a single check. */
    this.results = Array.isArray(json.results) ? json.results : undefined;
    /** sluiced's error code on a 429 or 503 ("rate_limit_exceeded", "backend_unavailable"). */
    this.error = json.error;
    /** What a key of a usage policy owes beyond its limit (0 when nothing); undefined otherwise. */
    this.debt = json.debt;
  }
}

/**
 * @param {unknown} value
 * @param {string} field
 */
function requireText(value, field) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`sluice check: ${field} must be a non-empty string, got ${typeof value}`);
  }
}

/** Builds one check's JSON object, leaving out what was not given. */
function checkBody(policy, key, options = {}) {
  requireText(policy, 'policy');
  requireText(key, 'key');
  /** @type {Record<string, unknown>} */
  const body = { policy, key };
  const { cost, tier, endpoint } = options;
  if (cost !== undefined && cost !== null) {
    if (!Number.isSafeInteger(cost) || cost < 0) {
      throw new TypeError(`sluice check: cost must be an integer >= 0, got ${cost}`);
    }
    body.cost = cost;
  }
  if (tier !== undefined && tier !== null) body.tier = String(tier);
  if (endpoint !== undefined && endpoint !== null) body.endpoint = String(endpoint);
  return body;
}

export class SluiceClient {
  #agent;
  #target;
  #where;
  #timeoutMs;
  #maxPending;
  #pending = 0;

  /**
   * @param {{socketPath?: string, url?: string, timeoutMs?: number, maxSockets?: number,
   *   maxPending?: number, failures?: FailureLog}} [options]
   */
  constructor(options = {}) {
    const maxSockets = options.maxSockets ?? DEFAULT_MAX_SOCKETS;
    if (!Number.isSafeInteger(maxSockets) || maxSockets < 1) {
      throw new TypeError(`sluice client: maxSockets must be an integer >= 1, got ${maxSockets}`);
    }
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.#timeoutMs > 0)) {
      throw new TypeError(`sluice client: timeoutMs must be > 0, got ${this.#timeoutMs}`);
    }
    this.#maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
    if (options.url !== undefined) {
      const url = new URL(options.url);
      if (url.protocol !== 'http:') {
        throw new TypeError(`sluice client: url must be http://HOST:PORT, got ${options.url}`);
      }
      this.#target = { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port || 80 };
      this.#where = url.origin;
    } else {
      const socketPath = options.socketPath ?? process.env.SLUICE_SOCKET ?? DEFAULT_SOCKET;
      this.#target = { socketPath };
      this.#where = socketPath;
    }
    // LIFO hands out the most recently used socket, so a quiet app keeps few connections warm
    // and the rest reach the daemon's idle timeout and close.
    this.#agent = new http.Agent({
      keepAlive: true,
      maxSockets,
      maxFreeSockets: maxSockets,
      scheduling: 'lifo',
    });
    /** Failed middleware checks: counted, and logged once per burst. */
    this.failures = options.failures ?? new FailureLog();
    /** The middlewares' charges that were lost (the responses were served): counted, and logged once per burst. */
    this.chargeFailures =
      options.chargeFailures ?? new FailureLog({ what: 'charge(s)', log: options.failures?.log });
    /** The middlewares' charges sluiced answered. */
    this.charges = 0;
  }

  /** Where this client sends its checks: the socket path or the http origin. */
  get address() {
    return this.#where;
  }

  /** The per-call timeout, in milliseconds. */
  get timeoutMs() {
    return this.#timeoutMs;
  }

  /**
   * Asks sluiced whether `key` may go on under `policy`.
   * @param {string} policy
   * @param {string} key
   * @param {{cost?: number, tier?: string, endpoint?: string, timeoutMs?: number}} [options]
   * @returns {Promise<Decision>}
   */
  check(policy, key, options) {
    let body;
    try {
      body = checkBody(policy, key, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#post(JSON.stringify(body), options?.timeoutMs ?? this.#timeoutMs, CHECK_PATH);
  }

  /**
   * Charges `amount` (what a request used; negative refunds) to `key` of the usage policy
   * `policy` (`usage = true`). sluiced always debits, into debt when the key has less left, and
   * answers with the body of a check: `allowed` says whether the key still has room for a
   * request, `debt` what it owes beyond its limit. Rejects as `check` does (a policy that is not
   * a usage policy: SluiceRequestError 400).
   * @param {string} policy
   * @param {string} key
   * @param {number} amount
   * @param {{tier?: string, timeoutMs?: number}} [options]
   * @returns {Promise<Decision>}
   */
  charge(policy, key, amount, options) {
    let body;
    try {
      requireText(policy, 'policy');
      requireText(key, 'key');
      if (!Number.isSafeInteger(amount)) {
        throw new TypeError(`sluice charge: amount must be an integer, got ${amount}`);
      }
      body = { policy, key, amount };
      if (options?.tier !== undefined && options.tier !== null) body.tier = String(options.tier);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#post(JSON.stringify(body), options?.timeoutMs ?? this.#timeoutMs, CHARGE_PATH);
  }

  /**
   * Decides several checks all-or-nothing: if any is denied none consumes.
   * @param {Array<{policy: string, key: string, cost?: number, tier?: string, endpoint?: string}>} checks
   * @param {{timeoutMs?: number}} [options]
   * @returns {Promise<Decision>}
   */
  checkBatch(checks, options) {
    let body;
    try {
      if (!Array.isArray(checks) || checks.length < 1 || checks.length > MAX_BATCH) {
        throw new TypeError(`sluice checkBatch: 1 to ${MAX_BATCH} checks, got ${checks?.length}`);
      }
      body = { checks: checks.map((c) => checkBody(c.policy, c.key, c)) };
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#post(JSON.stringify(body), options?.timeoutMs ?? this.#timeoutMs, CHECK_PATH);
  }

  /** Closes the pooled connections. Calls after this open new ones. */
  close() {
    this.#agent.destroy();
  }

  /**
   * @param {string} payload
   * @param {number} timeoutMs
   * @param {string} path CHECK_PATH or CHARGE_PATH
   * @returns {Promise<Decision>}
   */
  #post(payload, timeoutMs, path) {
    if (this.#pending >= this.#maxPending) {
      return Promise.reject(
        new SluiceUnavailableError(
          `${this.#pending} checks already waiting for sluiced at ${this.#where}`,
          { reason: 'overloaded' },
        ),
      );
    }
    this.#pending += 1;
    return new Promise((resolve, reject) => {
      /** @type {http.ClientRequest | undefined} */
      let current;
      let settled = false;
      const settle = (error, decision) => {
        if (settled) return;
        settled = true;
        this.#pending -= 1;
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(decision);
      };
      const expire = () => {
        if (settled) return;
        settle(
          new SluiceUnavailableError(
            `no answer from sluiced at ${this.#where} within ${timeoutMs} ms`,
            { reason: 'timeout' },
          ),
        );
        current?.destroy();
      };
      // Timers run before the loop reads sockets: on a busy loop an answer that arrived in time
      // may still be unread when the timer fires. setImmediate runs after this iteration's
      // reads, so such an answer wins, and a true hang costs one loop iteration more.
      const timer = setTimeout(() => setImmediate(expire), timeoutMs);

      const attempt = (mayRetry) => {
        const req = http.request({
          ...this.#target,
          agent: this.#agent,
          method: 'POST',
          path,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
          },
        });
        current = req;
        let answered = false;
        req.on('response', (res) => {
          answered = true;
          const chunks = [];
          let size = 0;
          res.on('data', (chunk) => {
            size += chunk.length;
            if (size > MAX_ANSWER_BYTES) {
              settle(this.#badAnswer(`an answer over ${MAX_ANSWER_BYTES} bytes`));
              req.destroy();
              return;
            }
            chunks.push(chunk);
          });
          res.on('end', () => {
            try {
              settle(null, this.#decide(res, Buffer.concat(chunks, size)));
            } catch (error) {
              settle(error);
            }
          });
          res.on('error', (error) => settle(this.#transport(error)));
          res.on('close', () => {
            if (!res.complete) settle(this.#transport(new Error('connection closed mid-answer')));
          });
        });
        req.on('error', (error) => {
          if (settled) return;
          // A keep-alive socket the daemon closed (idle timeout, restart) fails on first use;
          // the question never reached it, so asking once more on a fresh socket is safe.
          if (mayRetry && !answered && req.reusedSocket && STALE_SOCKET_CODES.has(error.code)) {
            attempt(false);
            return;
          }
          settle(this.#transport(error));
        });
        req.end(payload);
      };
      attempt(true);
    });
  }

  /**
   * @param {http.IncomingMessage} res
   * @param {Buffer} body
   */
  #decide(res, body) {
    const status = res.statusCode ?? 0;
    let json;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      throw this.#badAnswer(`status ${status} with a body that is not JSON`);
    }
    if (json === null || typeof json !== 'object') {
      throw this.#badAnswer(`status ${status} with a body that is not a JSON object`);
    }
    if (DECISION_STATUSES.has(status)) return new Decision(status, res.headers, body, json);
    if (status >= 400 && status < 500 && typeof json.error === 'string') {
      throw new SluiceRequestError(status, json.error, String(json.message ?? ''));
    }
    throw this.#badAnswer(`status ${status}`);
  }

  #badAnswer(what) {
    return new SluiceUnavailableError(`unexpected answer from sluiced at ${this.#where}: ${what}`, {
      reason: 'bad_answer',
    });
  }

  #transport(cause) {
    return new SluiceUnavailableError(`cannot reach sluiced at ${this.#where}: ${cause.message}`, {
      cause,
      reason: 'transport',
    });
  }
}
