// Starts a real sluiced (the binary named by $SLUICED) on a Unix socket in a temp directory, with
// a config the tests write, and stops it when asked or when the test process exits.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const STARTUP_MS = 15_000;
const LOG_LIMIT = 64 * 1024;

/** Every daemon still running: killed when the test process exits, however it exits. */
const live = new Set();
process.on('exit', () => {
  for (const child of live) {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }
});

/**
 * The sluiced binary, or null when there is none and CI is unset (tests then skip). Under CI a
 * missing binary throws, so the suite fails instead of passing on skipped tests.
 */
export function sluicedBinary() {
  const bin = process.env.SLUICED;
  if (bin && existsSync(bin)) return bin;
  const why = bin ? `SLUICED=${bin} does not exist` : 'SLUICED is not set';
  if (process.env.CI) throw new Error(`${why}; the client tests need a sluiced binary`);
  console.error(`# ${why}: skipping the tests that need sluiced`);
  return null;
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** One HTTP exchange over the socket, outside the client under test. */
export function rawRequest(socketPath, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, method, path: urlPath, agent: false, timeout: 2000 },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

export class Daemon {
  /** @type {import('node:child_process').ChildProcess | null} */
  child = null;
  log = '';

  /**
   * @param {string} bin
   * @param {(socketPath: string) => string} configOf the TOML config, given the socket path
   */
  constructor(bin, configOf) {
    this.bin = bin;
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-node-'));
    this.socketPath = path.join(this.dir, 's.sock');
    this.configPath = path.join(this.dir, 'sluice.toml');
    writeFileSync(this.configPath, configOf(this.socketPath));
  }

  static async start(bin, configOf) {
    const daemon = new Daemon(bin, configOf);
    await daemon.start();
    return daemon;
  }

  get pid() {
    return this.child?.pid;
  }

  async start() {
    const child = spawn(this.bin, ['--config', this.configPath], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, SLUICE_SOCKET: this.socketPath },
    });
    this.child = child;
    live.add(child);
    child.once('exit', () => live.delete(child));
    const keep = (chunk) => {
      this.log = (this.log + chunk.toString()).slice(-LOG_LIMIT);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    this.exited = exited;
    const deadline = Date.now() + STARTUP_MS;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`sluiced exited at start (${child.exitCode ?? child.signalCode}):\n${this.log}`);
      }
      try {
        const res = await rawRequest(this.socketPath, 'GET', '/healthz');
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`sluiced did not start in time:\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async stop() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    if (this.paused) this.resume();
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(killer);
  }

  /**
   * Freezes the daemon: connections are accepted by the kernel and never answered. A stop
   * reaches each thread when it is next scheduled, so this waits until every one has stopped.
   */
  async pause() {
    this.child?.kill('SIGSTOP');
    this.paused = true;
    const tasks = `/proc/${this.pid}/task`;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const states = readdirSync(tasks).map((tid) => {
        try {
          // Field 3 of stat, after the parenthesised command name: T = stopped.
          return readFileSync(`${tasks}/${tid}/stat`, 'utf8').split(') ')[1]?.[0];
        } catch {
          return 'T'; // the thread ended
        }
      });
      if (states.every((state) => state === 'T')) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error('sluiced did not stop on SIGSTOP');
  }

  resume() {
    this.child?.kill('SIGCONT');
    this.paused = false;
  }

  /** Connections the daemon holds on its socket (the listener excluded), from /proc/net/unix. */
  connections() {
    const lines = readFileSync('/proc/net/unix', 'utf8').split('\n');
    // Columns: Num RefCount Protocol Flags Type St Inode Path; St 01 = unconnected (listener).
    return lines.filter((line) => {
      const cols = line.trim().split(/\s+/);
      return cols[7] === this.socketPath && cols[5] !== '01';
    }).length;
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * The config the tests share: small limits, a tiered policy, one named endpoint. Windows are
 * aligned to unix time, so they last a week: a test never sees its window end midway.
 */
export function memoryConfig(socketPath) {
  return `
[listen]
unix = "${socketPath}"
http = ""
shutdown_timeout = "1s"

[backend]
kind = "memory"

[policies.fw]
algorithm = "fixed_window"
limit = 3
window = "7d"

[policies.tiered]
algorithm = "fixed_window"
limit = 5
window = "7d"
tiers = { pro = { limit = 10 } }
endpoints = ["/orders/:id"]

[policies.roomy]
algorithm = "fixed_window"
limit = 1000000
window = "7d"
`;
}

/** A daemon on a Redis backend nothing listens for: one policy fails closed, one open. */
export function failClosedConfig(redisPort) {
  return (socketPath) => `
[listen]
unix = "${socketPath}"
http = ""
shutdown_timeout = "1s"

[backend]
kind = "redis"
url = "redis://127.0.0.1:${redisPort}"
timeout = "50ms"

[policies.closed]
algorithm = "fixed_window"
limit = 3
window = "7d"
fail = "closed"

[policies.opened]
algorithm = "fixed_window"
limit = 3
window = "7d"
fail = "open"
`;
}

/**
 * A usage policy of 100 tokens a week (windows aligned to unix time: no edge inside a test run
 * in practice), and a policy that is not one.
 */
export function usageConfig(socketPath) {
  return `
[listen]
unix = "${socketPath}"
http = ""
shutdown_timeout = "1s"

[backend]
kind = "memory"

[policies.tokens]
algorithm = "fixed_window"
limit = 100
window = "7d"
usage = true

[policies.plain]
algorithm = "fixed_window"
limit = 100
window = "7d"
`;
}
