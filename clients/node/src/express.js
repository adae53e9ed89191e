// Express middleware (4 and 5): asks sluiced before the route runs and writes its answer the way
// Express apps expect: headers on every answer, 429 with sluiced's problem document on a denial.

import { PROBLEM_JSON, UNAVAILABLE_BODY, createLimiter, defaultKey } from './limiter.js';

/** The route pattern when the middleware sits on a route, else the path. */
function expressEndpoint(req) {
  if (req.route?.path !== undefined) return (req.baseUrl ?? '') + String(req.route.path);
  const url = req.originalUrl ?? req.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** The default denial: sluiced's own 429 body, as it sent it. */
function deny(_req, res, _next, decision) {
  res.statusCode = 429;
  res.setHeader('Content-Type', PROBLEM_JSON);
  res.setHeader('Content-Length', decision.body.length);
  res.end(decision.body);
}

/**
 * @param {import('../index.js').ExpressOptions} options
 * @returns {import('express').RequestHandler & {failures: import('./failures.js').FailureLog}}
 */
export function sluiceExpress(options) {
  const limiter = createLimiter(options, { key: defaultKey, endpoint: expressEndpoint });
  const onDenied = limiter.onDenied ?? deny;

  const answer = (req, res, next, { decision, key, tier }) => {
    if (decision === null) {
      if (!limiter.failClosed) {
        limiter.meter(req, res, key, tier);
        return next();
      }
      res.statusCode = 503;
      res.setHeader('Retry-After', '1');
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Content-Length', UNAVAILABLE_BODY.length);
      return res.end(UNAVAILABLE_BODY);
    }
    for (const name in decision.headers) res.setHeader(name, decision.headers[name]);
    if (decision.status === 200) {
      limiter.meter(req, res, key, tier);
      return next();
    }
    if (decision.status === 429) return onDenied(req, res, next, decision);
    // sluiced's own 503: a fail-closed policy whose backend is down. Passed on, never opened.
    res.statusCode = decision.status;
    res.setHeader('Content-Type', decision.contentType);
    res.setHeader('Content-Length', decision.body.length);
    return res.end(decision.body);
  };

  const middleware = (req, res, next) => {
    limiter.decide(req).then(
      (decided) => {
        try {
          answer(req, res, next, decided);
        } catch (error) {
          next(error);
        }
      },
      next,
    );
  };
  middleware.failures = limiter.client.failures;
  return middleware;
}
