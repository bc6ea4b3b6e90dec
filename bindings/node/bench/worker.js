'use strict';
// One benchmark process (forked by run.js): W async workers, each looping
// acquire resource (i % K) -> hold -> release, between the start and end
// times the parent sends, recording every acquire on the shared wall clock
// (microseconds since the epoch: one clock for every process on this
// machine). Reports the records and its own CPU time over the window.
// With T > 0 the process runs T worker threads instead, each one client
// with W workers, and reports their records together.
const path = require('node:path');
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const argv = isMainThread ? process.argv.slice(2) : workerData;
const [lib, url, W, K, holdUs, depsDir, pi, T] = argv;
const threads = isMainThread ? Number(T || 0) : 0;
// To the parent: run.js for a process, the process for a thread.
const send = (m) => (isMainThread ? process.send(m) : parentPort.postMessage(m));
const nextMessage = () => new Promise((r) => (isMainThread ? process : parentPort).once('message', r));
const workers = Number(W);
const keys = Number(K);
const hold = Number(holdUs);
const TTL = 10000;
const RETRY_MS = 10; // every npm lock polls; the same delay for each
const dep = (name) => require(path.join(depsDir, 'node_modules', name));

const origin = performance.timeOrigin * 1000;
const nowUs = () => origin + performance.now() * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const holdFor = () => (hold > 0 ? sleep(hold / 1000) : null);

// Each engine: setup() -> { acquire(name) -> handle, release(handle), close() }
const engines = {
  async redturn() {
    const redturn = require(path.join(__dirname, '..'));
    const client = await redturn.connect(url);
    return {
      acquire: (name) => client.wait(name, { ttl: TTL }),
      release: (l) => l.release(),
      close: () => client.close(),
    };
  },
  async redislock() {
    const redis = dep('redis');
    const redislock = dep('redislock');
    const u = new URL(url);
    const c = redis.createClient(Number(u.port), u.hostname);
    await new Promise((r) => c.once('ready', r));
    const locks = new Map();
    return {
      acquire: async (name, w) => {
        let l = locks.get(w);
        if (!l) {
          l = redislock.createLock(c, { timeout: TTL, retries: -1, delay: RETRY_MS });
          locks.set(w, l);
        }
        await l.acquire(name);
        return l;
      },
      release: (l) => l.release(),
      close: () => new Promise((r) => c.quit(r)),
    };
  },
  async redlock4() {
    const IORedis = dep('ioredis');
    const Redlock = dep('redlock');
    const c = new IORedis(url);
    const rl = new Redlock([c], { retryCount: -1, retryDelay: RETRY_MS, retryJitter: 0 });
    rl.on('clientError', () => {});
    return {
      acquire: (name) => rl.lock(name, TTL),
      release: (l) => l.unlock(),
      close: () => c.quit(),
    };
  },
  async sesame() {
    const IORedis = dep('ioredis');
    const { Redlock } = dep('@sesamecare-oss/redlock');
    const c = new IORedis(url);
    const rl = new Redlock([c], { retryCount: -1, retryDelay: RETRY_MS, retryJitter: 0 });
    rl.on('error', () => {});
    return {
      acquire: (name) => rl.acquire([name], TTL),
      release: (l) => l.release(),
      close: () => c.quit(),
    };
  },
  async semaphore() {
    const IORedis = dep('ioredis');
    const { Mutex } = dep('redis-semaphore');
    const c = new IORedis(url);
    return {
      acquire: async (name) => {
        const m = new Mutex(c, name, {
          lockTimeout: TTL, acquireTimeout: 60000, retryInterval: RETRY_MS, refreshInterval: 0,
        });
        await m.acquire();
        return m;
      },
      release: (m) => m.release(),
      close: () => c.quit(),
    };
  },
  async ping() {
    const IORedis = dep('ioredis');
    const c = new IORedis(url);
    return {
      acquire: () => c.ping(),
      release: () => null,
      close: () => c.quit(),
    };
  },
};

async function run() {
  const engine = await engines[lib]();
  const prefix = `bench:${lib}:`;
  // Warm up (connections, script loading) before the measured window.
  for (let i = 0; i < 3; i++) {
    const h = await engine.acquire(`${prefix}warm:${pi}`, -1);
    await engine.release(h);
  }
  send({ ready: true });
  const { start, end } = await nextMessage();
  await sleep(Math.max(0, (start - nowUs()) / 1000));
  const cpu0 = process.cpuUsage();
  const recs = []; // [key, requestUs, grantUs, releaseUs] flattened
  let errors = 0;
  const loop = async (w) => {
    let i = w;
    while (nowUs() < end) {
      const key = i % keys;
      i += workers;
      const t0 = nowUs();
      let h;
      try {
        h = await engine.acquire(prefix + key, w);
      } catch (e) {
        errors++;
        continue;
      }
      const t1 = nowUs();
      await holdFor();
      const t2 = nowUs();
      try {
        await engine.release(h);
      } catch (e) {
        errors++;
      }
      recs.push(key, t0, t1, t2);
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, w) => loop(w)));
  const cpu = process.cpuUsage(cpu0);
  send({ recs, errors, cpuUs: cpu.user + cpu.system });
  await nextMessage();
  await engine.close();
}

// T worker threads: started and warmed up together, then given the same
// window; the process's CPU time (all its threads) over the window.
async function runThreads() {
  const ts = Array.from({ length: threads }, (_, t) =>
    new Worker(__filename, { workerData: [lib, url, W, K, holdUs, depsDir, `${pi}.${t}`] }));
  const once = (w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await Promise.all(ts.map(once));
  send({ ready: true });
  const window = await nextMessage();
  const results = ts.map(once);
  for (const w of ts) w.postMessage(window);
  await sleep(Math.max(0, (window.start - nowUs()) / 1000));
  const cpu0 = process.cpuUsage();
  const res = await Promise.all(results);
  const cpu = process.cpuUsage(cpu0);
  send({ recs: [].concat(...res.map((r) => r.recs)), errors: res.reduce((n, r) => n + r.errors, 0),
    cpuUs: cpu.user + cpu.system });
  await nextMessage();
  await Promise.all(ts.map((w) => new Promise((r) => { w.once('exit', r); w.postMessage({ exit: true }); })));
}

(threads > 0 ? runThreads() : run()).then(() => {
  if (isMainThread) process.exit(0);
}, (e) => {
  console.error(`${lib}: ${e && e.stack}`);
  process.exit(1);
});
