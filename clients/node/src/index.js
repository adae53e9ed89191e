// @sluice/client: the client of the sluice rate-limiter daemon and its Express and Fastify
// middleware. Named exports for each part, and a default namespace for
// `app.use(sluice.express({client, policy: "public"}))`.

import { Decision, RATE_LIMIT_HEADERS, SluiceClient } from './client.js';
import { SluiceError, SluiceRequestError, SluiceUnavailableError } from './errors.js';
import { sluiceExpress } from './express.js';
import { FailureLog } from './failures.js';
import { sluiceFastify, sluiceFastifyHook } from './fastify.js';

export {
  Decision,
  FailureLog,
  RATE_LIMIT_HEADERS,
  SluiceClient,
  SluiceError,
  SluiceRequestError,
  SluiceUnavailableError,
  sluiceExpress,
  sluiceFastify,
  sluiceFastifyHook,
};

/** `new sluice.Client(...)`, `sluice.express(...)`, `sluice.fastify`, `sluice.fastifyHook(...)`. */
const sluice = Object.freeze({
  Client: SluiceClient,
  express: sluiceExpress,
  fastify: sluiceFastify,
  fastifyHook: sluiceFastifyHook,
});
export default sluice;
