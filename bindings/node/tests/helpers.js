'use strict';
// Shared by the tests: the module under test, a Redis server, unique names.
const { spawn, execFileSync } = require('node:child_process');
const net = require('node:net');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// The installed package when there is one (scripts/test.sh runs the tests
// in a directory where the packed tarball was installed), else this tree.
let pkgRoot = path.join(__dirname, '..');
function load() {
  let main;
  try {
    main = require.resolve('redturn', { paths: [process.cwd()] });
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND') throw err;
    return require('..');
  }
  pkgRoot = path.join(path.dirname(main), '..');
  return require(main);
}
const redturn = load();

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function ping(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => resolve(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
  });
}

/** A private redis-server on 127.0.0.1 (extra args appended); stop() it. */
async function startRedis(extra = [], tlsPort = 0) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redturn-node-redis.'));
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
      '--appendonly', 'no', '--dir', dir, '--enable-debug-command', 'local', ...extra];
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    let exited = false;
    proc.on('exit', () => { exited = true; });
    for (let i = 0; i < 100 && !exited; i++) {
      if (await ping(port)) {
        return {
          port,
          url: `redis://127.0.0.1:${port}`,
          proc,
          dir,
          stop() {
            return new Promise((resolve) => {
              if (exited) { fs.rmSync(dir, { recursive: true, force: true }); return resolve(); }
              proc.once('exit', () => { fs.rmSync(dir, { recursive: true, force: true }); resolve(); });
              proc.kill('SIGTERM');
            });
          },
        };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!exited) proc.kill('SIGKILL');
  }
  throw new Error('could not start redis-server');
}

/** REDTURN_TEST_URL's server, or a private one. */
async function redisUrl(t) {
  if (process.env.REDTURN_TEST_URL) return process.env.REDTURN_TEST_URL;
  const srv = await startRedis();
  t.after(() => srv.stop());
  return srv.url;
}

/**
 * The hooks of a file whose tests share one client: before them, connect to
 * REDTURN_TEST_URL's server (or a private one) with options and hand
 * set(url, client) both; after them, close the client and the server.
 */
function sharedClient(set, options) {
  const { before, after } = require('node:test');
  let srv = null;
  let client = null;
  before(async () => {
    let url = process.env.REDTURN_TEST_URL;
    if (!url) {
      srv = await startRedis();
      url = srv.url;
    }
    client = await redturn.connect(url, options);
    set(url, client);
  });
  after(async () => {
    if (client) await client.close();
    if (srv) await srv.stop();
  });
}

let seq = 0;
/** A resource name no other test uses. */
function uniq(base) {
  return `node-test:${process.pid}:${Date.now()}:${++seq}:${base}`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wait until cond() holds, checking every 10 ms; false after ms. */
async function until(cond, ms) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() >= end) return false;
    await sleep(10);
  }
  return true;
}

/** Block the event loop for ms (a busy application). */
function busy(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* spin */ }
}

module.exports = {
  redturn, pkgRoot, startRedis, redisUrl, sharedClient, uniq, sleep, until, busy, freePort,
  execFileSync,
};
