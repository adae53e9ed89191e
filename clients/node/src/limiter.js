// What the Express middleware and the Fastify hook share: reading the options once, turning a
// request into a check, and turning any failure into "no decision" after counting it. Each
// framework file only says how its framework names the user, the address and the route, and how
// it writes an answer.

import { meterResponse } from './charges.js';
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
  if (options.charge !== undefined && typeof options.charge !== 'function') {
    throw new TypeError('sluice middleware: options.charge must be a function of the request returning a meter');
  }
  const keyOf = options.key ?? defaults.key;
  const costOf = perRequest(options.cost, 'cost');
  const tierOf = perRequest(options.tier, 'tier');
  const endpointOf = perRequest(options.endpoint, 'endpoint') ?? defaults.endpoint;
  const failClosed = options.failClosed === true;
  const outcome = failClosed ? 'failing closed' : 'failing open';
  const timeoutMs = options.timeoutMs;
  const chargeOf = options.charge;

  return {
    client,
    failClosed,
    onDenied: options.onDenied,
    /**
     * sluiced's decision for this request, or null when none could be had (counted and logged
     * by the client's FailureLog; the caller then fails open or closed), with the key and tier
     * asked about (undefined when they could not be had).
     * @returns {Promise<{decision: import('./client.js').Decision | null, key?: string, tier?: string}>}
     */
    async decide(req) {
      let key;
      let tier;
      try {
        key = await keyOf(req);
        tier = tierOf?.(req);
        const decision = await client.check(policy, key, {
          cost: costOf?.(req),
          tier,
          endpoint: endpointOf(req),
          timeoutMs,
        });
        return { decision, key, tier };
      } catch (error) {
        client.failures.record(error, outcome);
        return { decision: null, key, tier };
      }
    },
    /**
     * Before the app serves a request: with a `charge` option giving a meter for it, meters
     * `res` and charges the amount to the request's key and tier once it has been sent.
     * @param {any} req
     * @param {import('node:http').ServerResponse} res
     * @param {string | undefined} key
     * @param {string | undefined} tier
     */
    meter(req, res, key, tier) {
      if (chargeOf === undefined || typeof key !== 'string') return;
      const meter = chargeOf(req);
      if (meter) meterResponse(client, res, meter, { policy, key, tier });
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
