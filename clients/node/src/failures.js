// Counts the checks that could not be made and reports them to the log at most once per interval.
// A dead daemon fails every request: one log line per request would flood the app's log exactly
// when the operator needs it, so a burst of failures gives one line saying how many there were.

const DEFAULT_INTERVAL_MS = 10_000;

/** @param {string} line */
function defaultLog(line) {
  console.error(line);
}

export class FailureLog {
  /** Failed checks since this log was made; the counter an app reads or exports. */
  total = 0;
  #sinceLastLine = 0;
  #lastLineAt = -Infinity;
  #intervalMs;
  #log;
  #what;

  /**
   * @param {{intervalMs?: number, log?: (line: string) => void, what?: string}} [options]
   *   `what` names what failed in the log line (default "rate-limit check(s)")
   */
  constructor(options = {}) {
    this.#intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
    this.#log = options.log ?? defaultLog;
    this.#what = options.what ?? 'rate-limit check(s)';
  }

  /** The function lines are written to. */
  get log() {
    return this.#log;
  }

  /**
   * Counts one failed check; writes a line when the last one is at least an interval old.
   * @param {unknown} error
   * @param {string} outcome what the request got: "failing open" or "failing closed"
   */
  record(error, outcome) {
    this.total += 1;
    this.#sinceLastLine += 1;
    const now = performance.now();
    if (now - this.#lastLineAt < this.#intervalMs) return;
    const count = this.#sinceLastLine;
    this.#sinceLastLine = 0;
    this.#lastLineAt = now;
    const what = error instanceof Error ? error.message : String(error);
    try {
      this.#log(
        `sluice: ${count} ${this.#what} failed since the last report ` +
          `(${this.total} in all), ${outcome}; last error: ${what}`,
      );
    } catch {
      // A broken logger must not turn a failed check into a failed request.
    }
  }
}
