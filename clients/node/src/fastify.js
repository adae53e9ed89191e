// Fastify plugin (4.10+ and 5): an onRequest hook asking sluiced before the body is read.
// fastify-plugin is not needed: the symbol it sets (skip-override) is set here directly, so the
// hook applies to the context the plugin is registered in (the root, or a prefix's scope).

import { PROBLEM_JSON, UNAVAILABLE_BODY, createLimiter, defaultKey } from './limiter.js';

/** The route pattern Fastify matched, else the path. */
function fastifyEndpoint(request) {
  const pattern = request.routeOptions?.url;
  if (pattern) return pattern;
  const url = request.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** The default denial: sluiced's own 429 body, as it sent it. */
function deny(_request, reply, decision) {
  reply.code(429).header('content-type', PROBLEM_JSON).send(decision.body);
}

/**
 * An onRequest hook, for one route (`{onRequest: sluiceFastifyHook({...})}`) or a scope.
 * @param {import('../index.js').FastifyOptions} options
 */
export function sluiceFastifyHook(options) {
  const limiter = createLimiter(options, { key: defaultKey, endpoint: fastifyEndpoint });
  const onDenied = limiter.onDenied ?? deny;

  const answer = (request, reply, done, { decision, key, tier }) => {
    if (decision === null) {
      if (!limiter.failClosed) {
        limiter.meter(request, reply.raw, key, tier);
        return done();
      }
      reply
        .code(503)
        .header('retry-after', '1')
        .header('content-type', 'application/json')
        .send(UNAVAILABLE_BODY);
      return undefined;
    }
    for (const name in decision.headers) reply.header(name, decision.headers[name]);
    if (decision.status === 200) {
      limiter.meter(request, reply.raw, key, tier);
      return done();
    }
    // Answering from a callback hook: send, and do not call done.
    if (decision.status === 429) return onDenied(request, reply, decision);
    // sluiced's own 503: a fail-closed policy whose backend is down. Passed on, never opened.
    reply.code(decision.status).header('content-type', decision.contentType).send(decision.body);
    return undefined;
  };

  return function sluiceOnRequest(request, reply, done) {
    limiter.decide(request).then(
      (decided) => {
        try {
          answer(request, reply, done, decided);
        } catch (error) {
          done(error);
        }
      },
      done,
    );
  };
}

/**
 * `fastify.register(sluiceFastify, {client, policy: "public"})`.
 * @param {any} fastify
 * @param {import('../index.js').FastifyOptions} options
 * @param {(error?: Error) => void} done
 */
export function sluiceFastify(fastify, options, done) {
  try {
    fastify.addHook('onRequest', sluiceFastifyHook(options));
  } catch (error) {
    return done(error);
  }
  return done();
}
sluiceFastify[Symbol.for('skip-override')] = true;
sluiceFastify[Symbol.for('fastify.display-name')] = '@sluice/client';
