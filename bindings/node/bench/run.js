'use strict';
// redturn for Node.js beside the npm locks, one run, one redis-server:
//
//   node bindings/node/bench/run.js [--seconds S] [--deps DIR] [--url URL] [--json FILE]
//        [--engines redturn,ping,...] [--cases 1,7] [--module PATH]
//
// Engines: redturn (this addon), redislock@1.3.0 (on redis@3), redlock@4,
// @sesamecare-oss/redlock, redis-semaphore's Mutex (each on ioredis, every
// npm lock retrying every 10 ms, no retry limit), and ping (no lock: one
// PING per "acquire", the ceiling of one round trip). Cases: T=8 worker
// threads of one process (one client each) on K=1 resource, holds of 0 and
// 1000 us (a 1 ms timer); P=4 processes x W=8 async workers with K=1 and
// K=4 resources, the same holds; and uncontended (P=1 W=1 K=1 hold 0).
// A case with a hold also gives the holds' mean length (grant to release
// call) and K / that: the most acquires/s any lock could make with them.
// --module PATH starts the redis-server with the redturn module loaded
// (redturn then uses it; the npm locks do not). The npm packages are
// installed (npm install, once) into DIR (default
// $TMPDIR/redturn-node-bench), never into the repository.
const { fork, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { startRedis } = require('../tests/helpers');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const seconds = Number(opt('seconds', '3'));
const depsDir = path.resolve(opt('deps', path.join(os.tmpdir(), 'redturn-node-bench')));
const jsonOut = opt('json', null);
const only = opt('engines', null);

const ENGINES = [
  ['redturn', 'redturn (addon)'],
  ['redislock', 'redislock@1.3.0'],
  ['redlock4', 'redlock@4'],
  ['sesame', '@sesamecare-oss/redlock'],
  ['semaphore', 'redis-semaphore'],
  ['ping', 'ping (no lock)'],
].filter(([e]) => !only || only.split(',').includes(e));

const modulePath = opt('module', null);

const CASES = [
  { P: 1, T: 8, W: 1, K: 1, H: 0 },
  { P: 1, T: 8, W: 1, K: 1, H: 1000 },
  { P: 4, W: 8, K: 1, H: 0 },
  { P: 4, W: 8, K: 1, H: 1000 },
  { P: 4, W: 8, K: 4, H: 0 },
  { P: 4, W: 8, K: 4, H: 1000 },
  { P: 1, W: 1, K: 1, H: 0 },
].filter((_, i) => !opt('cases', null) || opt('cases', '').split(',').includes(String(i + 1)));

function installDeps() {
  if (fs.existsSync(path.join(depsDir, 'node_modules', 'redlock'))) return;
  fs.mkdirSync(depsDir, { recursive: true });
  fs.copyFileSync(path.join(__dirname, 'package.json'), path.join(depsDir, 'package.json'));
  console.error(`bench: installing the npm locks into ${depsDir}`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--silent'], { cwd: depsDir, stdio: 'inherit' });
}

// One command on a fresh connection (RESP inline), the raw reply.
function redisCmd(port, cmd) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    s.on('error', reject);
    s.on('connect', () => s.write(cmd + '\r\n'));
    s.on('data', (d) => {
      buf += d;
      const m = /^\$(\d+)\r\n/.exec(buf);
      if (buf[0] !== '$' || (m && buf.length >= m[0].length + Number(m[1]))) {
        s.destroy();
        resolve(buf);
      }
    });
  });
}

async function redisCpuUs(port) {
  const info = await redisCmd(port, 'INFO cpu');
  const get = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)[1]);
  return (get('used_cpu_sys') + get('used_cpu_user')) * 1e6;
}

function quantile(sorted, q) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// Pairs on one resource granted in the opposite order of their requests,
// counting only requests made at least GRACE_US apart (closer ones may
// reach Redis in either order).
const GRACE_US = 1000;
function fifoViolations(grants) {
  // grants: [{req, grant}] of one resource. Sweep in grant order; count the
  // earlier grants whose request came more than GRACE_US after this one's.
  grants.sort((a, b) => a.grant - b.grant);
  const reqs = grants.map((g) => g.req).sort((a, b) => a - b);
  const tree = new Int32Array(reqs.length + 1);
  const lowerBound = (x) => {
    let lo = 0, hi = reqs.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (reqs[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  };
  let seen = 0, inv = 0;
  const add = (i) => { for (i++; i <= reqs.length; i += i & -i) tree[i]++; };
  const sum = (i) => { let s = 0; for (; i > 0; i -= i & -i) s += tree[i]; return s; };
  for (const g of grants) {
    // earlier grants with req > g.req + GRACE_US
    const idx = lowerBound(g.req + GRACE_US + 1e-6);
    inv += seen - sum(idx);
    add(lowerBound(g.req));
    seen++;
  }
  return inv;
}

// Requests granted after a request made more than GRACE_US later on the
// same resource (each overtaken request once, however many overtook it).
function overtaken(grants) {
  grants.sort((a, b) => a.req - b.req);
  let n = 0, minGrant = Infinity, j = grants.length;
  for (let i = grants.length - 1; i >= 0; i--) {
    while (j > 0 && grants[j - 1].req > grants[i].req + GRACE_US) {
      j--;
      minGrant = Math.min(minGrant, grants[j].grant);
    }
    if (minGrant < grants[i].grant) n++;
  }
  return n;
}

function overlaps(holds) {
  holds.sort((a, b) => a.grant - b.grant);
  let n = 0, end = -Infinity;
  for (const h of holds) {
    if (h.grant < end) n++;
    end = Math.max(end, h.release);
  }
  return n;
}

async function runCase(engine, c, url, port) {
  const procs = [];
  for (let p = 0; p < c.P; p++) {
    const child = fork(path.join(__dirname, 'worker.js'),
      [engine, url, String(c.W), String(c.K), String(c.H), depsDir, String(p), String(c.T || 0)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    procs.push(child);
  }
  const once = (child) => new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`${engine} worker exited with ${code}`)));
  });
  await Promise.all(procs.map(once));
  await redisCmd(port, 'FLUSHALL');
  const cpu0 = await redisCpuUs(port);
  const nowUs = performance.timeOrigin * 1000 + performance.now() * 1000;
  const start = nowUs + 300e3;
  const end = start + seconds * 1e6;
  const results = procs.map(once);
  for (const child of procs) child.send({ start, end });
  const res = await Promise.all(results);
  const cpu1 = await redisCpuUs(port);
  for (const child of procs) child.send({ exit: true });
  await Promise.all(procs.map((ch) => new Promise((r) => (ch.exitCode !== null ? r() : ch.once('exit', r)))));

  const byKey = new Map();
  const acq = [];
  let n = 0, errors = 0, clientCpu = 0, lastRelease = start, held = 0;
  for (const r of res) {
    errors += r.errors;
    clientCpu += r.cpuUs;
    for (let i = 0; i < r.recs.length; i += 4) {
      const key = r.recs[i];
      const g = { req: r.recs[i + 1], grant: r.recs[i + 2], release: r.recs[i + 3] };
      acq.push(g.grant - g.req);
      held += g.release - g.grant;
      if (!byKey.has(key)) byKey.set(key, []);
      byKey.get(key).push(g);
      lastRelease = Math.max(lastRelease, g.release);
      n++;
    }
  }
  acq.sort((a, b) => a - b);
  let fifo = 0, over = 0, behind = 0;
  if (engine !== 'ping') {
    for (const gs of byKey.values()) {
      fifo += fifoViolations(gs.slice());
      behind += overtaken(gs.slice());
      over += overlaps(gs.slice());
    }
  }
  const wall = Math.max(seconds, (lastRelease - start) / 1e6);
  return {
    engine, procs: c.P, threads: c.T || 0, workers: c.W, keys: c.K, hold_us: c.H, acquires: n, errors,
    wall_s: +wall.toFixed(3),
    acquires_per_s: Math.round(n / wall),
    acquire_ms_p50: +(quantile(acq, 0.5) / 1000).toFixed(3),
    acquire_ms_p99: +(quantile(acq, 0.99) / 1000).toFixed(3),
    acquire_ms_max: +((acq[acq.length - 1] || 0) / 1000).toFixed(3),
    fifo_violations: engine === 'ping' ? null : fifo,
    overtaken_pct: engine === 'ping' || !n ? null : +((100 * behind) / n).toFixed(3),
    overlaps: engine === 'ping' ? null : over,
    // With a hold: the holds' mean length, grant to release call, and what
    // one lock per key could reach with such holds and no time between
    // them, K / hold.
    hold_ms_mean: engine === 'ping' || !n || !c.H ? null : +(held / n / 1000).toFixed(3),
    ceiling_per_s: engine === 'ping' || !held || !c.H ? null : Math.round((c.K * n * 1e6) / held),
    redis_cpu_us_per_acquire: n ? +((cpu1 - cpu0) / n).toFixed(1) : null,
    client_cpu_us_per_acquire: n ? +(clientCpu / n).toFixed(1) : null,
  };
}

async function main() {
  installDeps();
  let srv = null;
  let url = opt('url', null);
  if (!url) {
    srv = await startRedis(modulePath ? ['--loadmodule', path.resolve(modulePath)] : []);
    url = srv.url;
  }
  const port = Number(new URL(url).port);
  const rows = [];
  try {
    for (const c of CASES) {
      for (const [engine] of ENGINES) {
        const row = await runCase(engine, c, url, port);
        rows.push(row);
        console.error(`bench: ${JSON.stringify(row)}`);
      }
    }
  } finally {
    if (srv) await srv.stop();
  }
  const names = Object.fromEntries(ENGINES);
  console.log(`node ${process.version}, ${os.cpus().length} cores, ${seconds} s per case, one redis-server` +
    `${modulePath ? ' with the redturn module loaded' : ''}\n`);
  console.log('| case | engine | acquires/s | p50 ms | p99 ms | max ms | FIFO viol. | overtaken % | overlaps | Redis CPU us/acq | client CPU us/acq | hold ms | K / hold |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const cs = r.threads ? `T=${r.threads} threads K=${r.keys} H=${r.hold_us}us`
      : `P=${r.procs} W=${r.workers} K=${r.keys} H=${r.hold_us}us`;
    const fmt = (v) => (v === null ? '-' : String(v));
    console.log(`| ${cs} | ${names[r.engine]} | ${r.acquires_per_s} | ${r.acquire_ms_p50} | ${r.acquire_ms_p99} | ` +
      `${r.acquire_ms_max} | ${fmt(r.fifo_violations)} | ${fmt(r.overtaken_pct)} | ${fmt(r.overlaps)} | ` +
      `${r.redis_cpu_us_per_acquire} | ${r.client_cpu_us_per_acquire} | ${fmt(r.hold_ms_mean)} | ${fmt(r.ceiling_per_s)} |`);
  }
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(rows, null, 2) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
