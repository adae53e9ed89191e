// What the Express middleware and the Fastify hook share: reading the options once, turning a
// request into a check, and turning any failure into "no decision" after counting it. Each
// framework file only says how its framework names the user, the address and the route, and how
// it writes an answer.

import { SluiceClient } from './client.js';

/** The body of the middleware's own 503 when it fails closed. */
export const UNAVAILABLE_BODY = Buffer.from(
  JSON.stringify({
    error: 'rate_limiter_unavailable',
    message: 'The rate limiter could not be reached; retry shortly.',
  }),
);

export const PROBLEM_JSON = 'application/problem+json';

/**
 * A value given as a constant or as a function of the request.
 * @param {unknown} value
 * @param {string} name
 */
function perRequest(value, name) {
  if (typeof value === 'function') return value;
  if (value === undefined || value === null) return undefined;
  if (name === 'cost' && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new TypeError(`sluice middleware: cost must be an integer >= 0 or a function`);
  }
  return () => value;
}

/**
 * @param {Record<string, any>} options the middleware's options
 * @param {{key: (req: any) => string, endpoint: (req: any) => string}} defaults how this
 *   framework names the caller and the route
 */
export function createLimiter(options, defaults) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('sluice middleware: options {client, policy} are required');
  }
  const { client, policy } = options;
  if (!(client instanceof SluiceClient)) {
    throw new TypeError('sluice middleware: options.client must be a SluiceClient');
  }
  if (typeof policy !== 'string' || policy.length === 0) {
    throw new TypeError('sluice middleware: options.policy must be a non-empty string');
  }
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError('sluice middleware: options.key must be a function of the request');
  }
  if (options.onDenied !== undefined && typeof options.onDenied !== 'function') {
    throw new TypeError('sluice middleware: options.onDenied must be a function');
  }
  const keyOf = options.key ?? defaults.key;
  const costOf = perRequest(options.cost, 'cost');
  const tierOf = perRequest(options.tier, 'tier');
  const endpointOf = perRequest(options.endpoint, 'endpoint') ?? defaults.endpoint;
  const failClosed = options.failClosed === true;
  const outcome = failClosed ? 'failing closed' : 'failing open';
  const timeoutMs = options.timeoutMs;

  return {
    client,
    failClosed,
    onDenied: options.onDenied,
    /**
     * sluiced's decision for this request, or null when none could be had (counted and logged
     * by the client's FailureLog; the caller then fails open or closed).
     * @returns {Promise<import('./client.js').Decision | null>}
     */
    async decide(req) {
      try {
        const key = await keyOf(req);
        return await client.check(policy, key, {
          cost: costOf?.(req),
          tier: tierOf?.(req),
          endpoint: endpointOf(req),
          timeoutMs,
        });
      } catch (error) {
        client.failures.record(error, outcome);
        return null;
      }
    },
  };
}

/**
 * `user:<id>` when the framework's request carries a user (passport's `req.user.id`), else
 * `ip:<address>` as the framework resolved it behind its trusted-proxy setting.
 */
export function defaultKey(req) {
  const id = req.user?.id;
  if (id !== undefined && id !== null && id !== '') return `user:${id}`;
  return `ip:${req.ip ?? 'unknown'}`;
}
