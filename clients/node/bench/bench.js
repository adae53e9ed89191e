// Measures, in one run against one sluiced:
//  (a) the bare client: N sequential checks over the Unix socket, mean and p50;
//  (b) per framework, the same route with and without the middleware under wrk at one
//      connection: added latency = with - without, and its ratio to (a). wrk's mean carries
//      the scheduling stalls of a shared machine (ms-long, a few per run), so p50 is the figure;
//  (c) per framework, the middleware route under wrk at 32 connections: the most connections
//      sluiced held meanwhile (read from /proc/net/unix), which the pool (16) must bound.
// (a) and (b) alternate in BENCH_ROUNDS rounds and each row is the median over the rounds, so a
// burst of load from elsewhere on the machine skews one round, not the table.
// Prints a markdown table. Env: SLUICED (required), BENCH_SECONDS (per wrk run, default 3),
// BENCH_N (bare calls per round, default 3000), BENCH_ROUNDS (default 3).

import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { SluiceClient } from '../src/index.js';
import { Daemon, sluicedBinary } from '../test/daemon.js';

const run = promisify(execFile);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const N = Number(process.env.BENCH_N ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LOAD_CONNECTIONS = 32;
const POOL = 16;

const config = (socketPath) => `
[listen]
unix = "${socketPath}"
http = ""
shutdown_timeout = "1s"

[backend]
kind = "memory"

[policies.roomy]
algorithm = "fixed_window"
limit = 1000000000
window = "60s"
`;

const us = (ms) => (ms * 1000).toFixed(1);
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
/** The median of each field over the rounds. */
const medians = (rounds) =>
  Object.fromEntries(Object.keys(rounds[0]).map((k) => [k, median(rounds.map((r) => r[k]))]));

/** N sequential checks on one client: mean and p50 in ms. */
async function bareClient(client) {
  for (let i = 0; i < 500; i += 1) await client.check('roomy', 'ip:127.0.0.1');
  const times = new Float64Array(N);
  for (let i = 0; i < N; i += 1) {
    const start = process.hrtime.bigint();
    await client.check('roomy', 'ip:127.0.0.1');
    times[i] = Number(process.hrtime.bigint() - start) / 1e6;
  }
  times.sort();
  const mean = times.reduce((a, b) => a + b, 0) / N;
  return { mean, p50: times[Math.floor(N / 2)] };
}

/** wrk's "1.23ms" / "456.78us" / "1.01s" in ms. */
function wrkTime(text) {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (!match) throw new Error(`unreadable wrk time ${text}`);
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

async function wrk(url, connections) {
  const threads = Math.min(2, connections);
  const { stdout } = await run('wrk', [
    `-t${threads}`,
    `-c${connections}`,
    `-d${SECONDS}s`,
    '--latency',
    url,
  ]);
  const mean = /Latency\s+(\S+)/.exec(stdout);
  const p50 = /\s50%\s+(\S+)/.exec(stdout);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(stdout);
  if (!mean || !p50 || !rps) throw new Error(`unreadable wrk output:\n${stdout}`);
  if (errors) throw new Error(`wrk saw ${errors[1]} failed answers from ${url}`);
  return { mean: wrkTime(mean[1]), p50: wrkTime(p50[1]), rps: Number(rps[1]) };
}

async function startApp(framework, socketPath) {
  const child = spawn(process.execPath, ['bench/app.js', framework, socketPath], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => {
    stderr += c;
  });
  const [line] = await once(child.stdout, 'data');
  const port = Number(String(line).trim());
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
      return /failed checks: (\d+)/.exec(stderr)?.[1] ?? `? (${stderr.trim()})`;
    },
  };
}

const bin = sluicedBinary();
if (bin === null) {
  console.error('bench: set SLUICED to the sluiced binary');
  process.exit(1);
}
const daemon = await Daemon.start(bin, config);
try {
  const bareRounds = [];
  const rows = [];
  const notes = [];
  for (const framework of ['express', 'fastify']) {
    const app = await startApp(framework, daemon.socketPath);
    // Warm both routes (JIT, the pool) before measuring.
    await wrk(`${app.url}/plain`, 1);
    await wrk(`${app.url}/limited`, 1);
    const plainRounds = [];
    const limitedRounds = [];
    const inAppRounds = [];
    const bareClientOf = new SluiceClient({ socketPath: daemon.socketPath, timeoutMs: 1000 });
    for (let round = 0; round < ROUNDS; round += 1) {
      bareRounds.push(await bareClient(bareClientOf));
      plainRounds.push(await wrk(`${app.url}/plain`, 1));
      await fetch(`${app.url}/stats`); // resets
      limitedRounds.push(await wrk(`${app.url}/limited`, 1));
      const { mean, p50 } = await (await fetch(`${app.url}/stats`)).json();
      inAppRounds.push({ mean, p50 });
    }
    // Closed now so that the connections counted under load are the app's alone.
    bareClientOf.close();
    const bare = medians(bareRounds.slice(-ROUNDS));
    const without = medians(plainRounds);
    const withMw = medians(limitedRounds);
    const inApp = medians(inAppRounds);
    const added = withMw.mean - without.mean;
    const addedP50 = withMw.p50 - without.p50;
    rows.push(
      `| ${framework} route without middleware, wrk c=1 | ${us(without.mean)} | ${us(without.p50)} | ${without.rps.toFixed(0)} | |`,
      `| ${framework} route with middleware, wrk c=1 | ${us(withMw.mean)} | ${us(withMw.p50)} | ${withMw.rps.toFixed(0)} | |`,
      `| ${framework}: the check itself, timed inside the app during the c=1 run | ${us(inApp.mean)} | ${us(inApp.p50)} | | |`,
      `| **${framework} added per request** (with − without) | ${us(added)} | ${us(addedP50)} | | p50: **${(addedP50 / bare.p50).toFixed(2)}×** the bare call, ${(addedP50 / inApp.p50).toFixed(2)}× the check timed in the app; mean: ${(added / bare.mean).toFixed(2)}× (bare in these rounds ${us(bare.mean)} / ${us(bare.p50)} µs) |`,
    );
    const loadWithout = await wrk(`${app.url}/plain`, LOAD_CONNECTIONS);
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, daemon.connections());
    }, 50);
    const loadWith = await wrk(`${app.url}/limited`, LOAD_CONNECTIONS);
    clearInterval(sampler);
    most = Math.max(most, daemon.connections());
    rows.push(
      `| ${framework} without middleware, wrk c=${LOAD_CONNECTIONS} | ${us(loadWithout.mean)} | ${us(loadWithout.p50)} | ${loadWithout.rps.toFixed(0)} | |`,
      `| ${framework} with middleware, wrk c=${LOAD_CONNECTIONS} | ${us(loadWith.mean)} | ${us(loadWith.p50)} | ${loadWith.rps.toFixed(0)} | sluiced held at most ${most} connections (pool ${POOL}) |`,
    );
    const failed = await app.stop();
    notes.push(`${framework}: checks that failed (timeout) during the run: ${failed}`);
  }
  const bare = medians(bareRounds);
  console.log(
    `node ${process.version}, sluiced memory backend over a Unix socket; ${ROUNDS} rounds ` +
      `alternating (a) ${N} sequential calls and wrk c=1 ${SECONDS}s per route, medians shown\n`,
  );
  console.log('| measure | mean µs | p50 µs | req/s | ratio / note |');
  console.log('|---|---|---|---|---|');
  console.log(`| (a) bare client check, ${N} sequential | ${us(bare.mean)} | ${us(bare.p50)} | | |`);
  for (const row of rows) console.log(row);
  console.log('');
  for (const note of notes) console.log(note);
} finally {
  await daemon.cleanup();
}
