// The errors a check can end in. Two kinds, because an application must treat them
// differently: sluiced could not be asked (fail open or closed, per the middleware's fail mode)
// versus sluiced refused the question itself (a misconfigured app: an unknown policy, a bad key),
// whose code and message must reach the app's log.

/** Base class of every error this package throws. */
export class SluiceError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'SluiceError';
  }
}

/**
 * sluiced could not be reached, did not answer within the timeout, or gave an answer that is
 * not one of its documented ones (200, 429, 503, or a 4xx JSON error).
 */
export class SluiceUnavailableError extends SluiceError {
  /**
   * @param {string} message
   * @param {{cause?: unknown, reason: string}} options reason: "timeout", "transport",
   *   "bad_answer" or "overloaded"
   */
  constructor(message, options) {
    super(message, { cause: options.cause });
    this.name = 'SluiceUnavailableError';
    this.reason = options.reason;
  }
}

/** sluiced refused the request (400 bad_request, 404 unknown_policy, 413, ...). */
export class SluiceRequestError extends SluiceError {
  /**
   * @param {number} status the HTTP status sluiced answered
   * @param {string} code sluiced's `error` field
   * @param {string} detail sluiced's `message` field
   */
  constructor(status, code, detail) {
    super(`sluiced refused the check: ${status} ${code}: ${detail}`);
    this.name = 'SluiceRequestError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}
