// The meter of an OpenAI-compatible upstream (OpenAI, vLLM, llama.cpp, LiteLLM): the tokens a
// completion used are usage.total_tokens of its JSON answer, or of the last server-sent event
// carrying usage in a streamed one (stream_options.include_usage). A middleware writes each
// piece of the body to the meter as it goes to the client and asks for the amount at the end.

/** Bound on the copy of a JSON answer kept to parse at the end, and on one event of a stream. */
const MAX_METERED = 1 << 20;

/** usage.total_tokens of a completion (or of a chunk of one), else undefined. */
function totalTokens(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  const total = doc?.usage?.total_tokens;
  return Number.isSafeInteger(total) ? total : undefined;
}

/**
 * Tells a JSON answer (first byte `{`) from an event stream; keeps at most 1 MiB of a JSON
 * answer, parses a stream line by line keeping one event at a time.
 */
export class OpenAIUsage {
  #mode = ''; // '', 'json', 'sse'
  #chunks = [];
  #size = 0;
  #over = false;
  #line = '';
  #lineOver = false;
  #data = '';
  #total;
  #decoder = new TextDecoder();

  /** @param {Buffer | Uint8Array} chunk */
  write(chunk) {
    if (this.#mode === '') {
      let start = 0;
      while (start < chunk.length && [0x20, 0x09, 0x0d, 0x0a].includes(chunk[start])) start += 1;
      if (start === chunk.length) return;
      this.#mode = chunk[start] === 0x7b ? 'json' : 'sse';
    }
    if (this.#mode === 'json') {
      this.#size += chunk.length;
      if (this.#size > MAX_METERED) {
        this.#over = true;
        this.#chunks = [];
      }
      if (!this.#over) this.#chunks.push(Buffer.from(chunk));
      return;
    }
    let text = this.#decoder.decode(chunk, { stream: true });
    for (;;) {
      const newline = text.indexOf('\n');
      if (newline === -1) {
        this.#extendLine(text);
        return;
      }
      this.#extendLine(text.slice(0, newline));
      this.#endLine();
      text = text.slice(newline + 1);
    }
  }

  #extendLine(piece) {
    if (this.#line.length + piece.length > MAX_METERED) {
      this.#lineOver = true;
      this.#line = '';
    }
    if (!this.#lineOver) this.#line += piece;
  }

  #endLine() {
    const line = this.#line.endsWith('\r') ? this.#line.slice(0, -1) : this.#line;
    const over = this.#lineOver;
    this.#line = '';
    this.#lineOver = false;
    if (over) return;
    if (line === '') {
      this.#endEvent();
    } else if (line.startsWith('data:')) {
      let value = line.slice(5);
      if (value.startsWith(' ')) value = value.slice(1);
      if (this.#data.length + value.length + 1 > MAX_METERED) {
        this.#data = '';
        return;
      }
      this.#data = this.#data === '' ? value : `${this.#data}\n${value}`;
    }
  }

  #endEvent() {
    const data = this.#data;
    this.#data = '';
    // Most events are token deltas: only one that names usage is parsed.
    if (data.includes('"usage"')) {
      const total = totalTokens(data);
      if (total !== undefined) this.#total = total;
    }
  }

  /**
   * What the finished response used, or undefined.
   * @param {number} _status
   * @param {Record<string, unknown>} _headers
   * @returns {number | undefined}
   */
  amount(_status, _headers) {
    if (this.#mode === 'json') {
      return this.#over ? undefined : totalTokens(Buffer.concat(this.#chunks).toString('utf8'));
    }
    if (this.#mode === 'sse') {
      // A stream may end without the empty line after its last event.
      this.#line += this.#decoder.decode();
      if (this.#line !== '') this.#endLine();
      if (this.#data !== '') this.#endEvent();
    }
    return this.#total;
  }
}

/** A middleware's `charge` option for an OpenAI-compatible upstream: a meter per request. */
export function openAIUsage(_req) {
  return new OpenAIUsage();
}
