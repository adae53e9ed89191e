// Metering a response as it is written and charging its amount once it has been sent. A charge
// must never delay a response nor turn into an error for the caller: the body goes to the
// socket first and to the meter after, and the charge starts on a later turn of the event loop
// once the response has finished; a lost charge is counted and logged by the client, and that
// is all. (The client's maxPending bounds the charges in flight with the checks.)

/** A written chunk as bytes, whatever form `write`/`end` got it in. */
function bytesOf(chunk, encoding) {
  if (chunk === undefined || chunk === null || typeof chunk === 'function') return undefined;
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
  }
  return chunk;
}

/**
 * Shows every chunk written to `res` to the meter, and charges the meter's amount to `key`
 * (and `tier`) of `policy` once `res` has finished.
 * @param {import('./client.js').SluiceClient} client
 * @param {import('node:http').ServerResponse} res
 * @param {{write(chunk: Uint8Array): void, amount(status: number, headers: Record<string, unknown>): number | undefined | null}} meter
 * @param {{policy: string, key: string, tier?: string}} target
 */
export function meterResponse(client, res, meter, target) {
  const write = res.write;
  const end = res.end;
  const feed = (chunk, encoding) => {
    const bytes = bytesOf(chunk, encoding);
    if (bytes === undefined || bytes.length === 0) return;
    try {
      meter.write(bytes);
    } catch (error) {
      meter = null;
      client.chargeFailures.record(error, 'the response was served');
    }
  };
  res.write = function meteredWrite(chunk, encoding, callback) {
    const result = write.call(this, chunk, encoding, callback);
    if (meter) feed(chunk, encoding);
    return result;
  };
  res.end = function meteredEnd(chunk, encoding, callback) {
    const result = end.call(this, chunk, encoding, callback);
    if (meter) feed(chunk, encoding);
    return result;
  };
  res.once('finish', () => {
    setImmediate(() => {
      if (meter) charge(client, meter, res.statusCode, res.getHeaders(), target);
    });
  });
}

function charge(client, meter, status, headers, { policy, key, tier }) {
  let amount;
  try {
    amount = meter.amount(status, headers);
  } catch (error) {
    client.chargeFailures.record(error, 'the response was served');
    return;
  }
  if (amount === undefined || amount === null || amount === 0) return;
  client.charge(policy, key, amount, { tier }).then(
    () => {
      client.charges += 1;
    },
    (error) => client.chargeFailures.record(error, 'the response was served'),
  );
}
