// Every Express and Fastify app the docs show runs as written. A block fenced ```js app``` in
// the README, the book (docs/src) or this package's README is a whole program: it listens on
// $PORT and guards GET / with policy "public" through the client's defaults ($SLUICE_SOCKET).
// Each is copied into this package (so `@sluice/client` resolves to it, as for an app that
// installed it), run against a real sluiced whose "public" allows 3 requests, and must answer
// 200 three times, then 429 with Retry-After.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Daemon, closedPort, sluicedBinary } from './daemon.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, '..');
const repo = path.resolve(pkg, '../..');

/** The Markdown files a reader meets: the README, the book's pages, this package's README. */
function documents() {
  const book = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const p = path.join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.md')) book.push(p);
    }
  };
  walk(path.join(repo, 'docs/src'));
  return [path.join(repo, 'README.md'), ...book.sort(), path.join(pkg, 'README.md')];
}

/** [{where, code}] of every ```js app``` block of the docs. */
function appSnippets() {
  const found = [];
  for (const file of documents()) {
    const lines = readFileSync(file, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i += 1) {
      const open = lines[i].match(/^(\s*)```(.*)$/);
      if (!open) continue;
      const info = open[2].trim().split(/[\s,]+/);
      let end = i + 1;
      while (end < lines.length && !lines[end].trim().startsWith('```')) end += 1;
      if (info[0] === 'js' && info.includes('app')) {
        const indent = open[1].length;
        const code = lines.slice(i + 1, end).map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)));
        found.push({ where: `${path.relative(repo, file)}:${i + 1}`, code: `${code.join('\n')}\n` });
      }
      i = end;
    }
  }
  return found;
}

const config = (socketPath) => `
[listen]
unix = "${socketPath}"
http = ""

[policies.public]
algorithm = "fixed_window"
limit = 3
window = "7d"
`;

/** GET / on the app; null while nothing listens yet. */
function get(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, retryAfter: res.headers['retry-after'] }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

const bin = sluicedBinary();
const snippets = appSnippets();
const scratch = path.join(here, '.snippets');

describe('the docs\' Express and Fastify apps', { skip: bin === null }, () => {
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it('are found: an Express and a Fastify app at least', () => {
    const text = snippets.map((s) => s.code).join('\n');
    assert.ok(snippets.length >= 4, snippets.map((s) => s.where).join(', '));
    assert.match(text, /from 'express'/);
    assert.match(text, /from 'fastify'/);
  });

  for (const snippet of snippets) {
    it(`${snippet.where} answers 200 three times, then 429`, async () => {
      const daemon = await Daemon.start(bin, config);
      mkdirSync(scratch, { recursive: true });
      const file = path.join(scratch, `${snippet.where.replace(/[^A-Za-z0-9]/g, '_')}.mjs`);
      writeFileSync(file, snippet.code);
      const port = await closedPort();
      let log = '';
      const app = spawn(process.execPath, [file], {
        cwd: pkg,
        env: { ...process.env, PORT: String(port), SLUICE_SOCKET: daemon.socketPath },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      app.stdout.on('data', (c) => { log += c; });
      app.stderr.on('data', (c) => { log += c; });
      try {
        let first = null;
        for (let tries = 0; first === null && tries < 200; tries += 1) {
          if (app.exitCode !== null) assert.fail(`the app exited (${app.exitCode}):\n${log}`);
          first = await get(port);
          if (first === null) await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(first, `the app never listened on $PORT:\n${log}`);
        const answers = [first, await get(port), await get(port), await get(port)];
        assert.deepEqual(answers.map((a) => a?.status), [200, 200, 200, 429], log);
        assert.ok(Number(answers[3].retryAfter) > 0, 'a 429 carries Retry-After');
      } finally {
        app.kill('SIGKILL');
        await daemon.cleanup();
      }
    });
  }
});
