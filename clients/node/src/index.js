// @sluice/client: the client of the sluice rate-limiter daemon and its Express and Fastify
// middleware. Named exports for each part, and a default namespace for
// `app.use(sluice.express({client, policy: "public"}))`.

import { Decision, RATE_LIMIT_HEADERS, SluiceClient } from './client.js';
import { SluiceError, SluiceRequestError, SluiceUnavailableError } from './errors.js';
import { sluiceExpress } from './express.js';
import { FailureLog } from './failures.js';
import { sluiceFastify, sluiceFastifyHook } from './fastify.js';
import { OpenAIUsage, openAIUsage } from './usage.js';

export {
  Decision,
  FailureLog,
  OpenAIUsage,
  RATE_LIMIT_HEADERS,
  SluiceClient,
  SluiceError,
  SluiceRequestError,
  SluiceUnavailableError,
  openAIUsage,
  sluiceExpress,
  sluiceFastify,
  sluiceFastifyHook,
};

/**
 * `new sluice.Client(...)`, `sluice.express(...)`, `sluice.fastify`, `sluice.fastifyHook(...)`,
 * `sluice.openAIUsage` (a `charge` option).
 */
const sluice = Object.freeze({
  Client: SluiceClient,
  express: sluiceExpress,
  fastify: sluiceFastify,
  fastifyHook: sluiceFastifyHook,
  openAIUsage,
});
export default sluice;
