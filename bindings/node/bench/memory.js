'use strict';
// The memory of one long-lived process using the addon:
//
//   node --expose-gc bindings/node/bench/memory.js [--cycles N] [--aborted N] [--dropped N]
//        [--steps S] [--warm W] [--url URL]
//
// 8 lanes of wait + release cycles, waits aborted by their AbortSignal while
// another client holds the resource, and Locks dropped without release()
// (released by the FinalizationRegistry once collected), mixed: each of the
// S steps runs 1/10 of each count; W warm-up steps (default 3) come first.
// After the warm-up and after each step, a full GC, then one line: heapUsed,
// heapTotal, RSS and RSS - heapTotal, in MB. Defaults: 200 000 cycles,
// 50 000 aborted waits, 20 000 dropped Locks, 10 steps. Without --url it
// starts its own redis-server.
const redturn = require('..');
const { startRedis } = require('../tests/helpers');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const cycles = Number(opt('cycles', '200000'));
const aborted = Number(opt('aborted', '50000'));
const dropped = Number(opt('dropped', '20000'));
const steps = Number(opt('steps', '10'));
const warm = Number(opt('warm', '3'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc');
  let srv = null;
  let url = opt('url', null);
  if (!url) {
    srv = await startRedis();
    url = srv.url;
  }
  const lanes = 8;
  const tag = `bench-memory:${process.pid}`;
  const client = await redturn.connect(url);
  const holder = await redturn.connect(url);
  const held = [];
  for (let i = 0; i < lanes; i++) held.push(await holder.wait(`${tag}:held:${i}`, { ttl: 60000, autoRenew: true }));
  let seq = 0;
  const lane = (n, fn) => Promise.all(Array.from({ length: lanes }, async (_, i) => {
    for (let k = i; k < n; k += lanes) await fn(i);
  }));
  const cycle = (i) => client.wait(`${tag}:c:${i}`, { ttl: 10000 }).then((l) => l.release());
  const abort = async (i) => {
    const ac = new AbortController();
    const w = client.wait(`${tag}:held:${i}`, { signal: ac.signal });
    setImmediate(() => ac.abort());
    await w.then(() => { throw new Error('granted a held lock'); }, (e) => {
      if (e.code !== 'RT_ECANCELED') throw e;
    });
  };
  const drop = async () => { await client.wait(`${tag}:d:${seq++}`, { ttl: 60000 }); };
  const step = async () => {
    await lane(cycles / 10, cycle);
    await lane(aborted / 10, abort);
    await lane(dropped / 10, drop);
  };
  const mb = (x) => (x / 1e6).toFixed(2).padStart(7);
  const sample = async (label) => {
    global.gc();
    await sleep(50);
    global.gc();
    const m = process.memoryUsage();
    console.log(`${label.padEnd(8)} heapUsed ${mb(m.heapUsed)}  heapTotal ${mb(m.heapTotal)}  ` +
      `rss ${mb(m.rss)}  rss-heapTotal ${mb(m.rss - m.heapTotal)}`);
  };
  console.log(`node ${process.version}: ${cycles} cycles, ${aborted} aborted waits, ${dropped} dropped Locks ` +
    `per 10 steps; ${warm} warm-up steps, ${steps} measured`);
  for (let s = 0; s < warm; s++) await step();
  await sample('warm');
  for (let s = 1; s <= steps; s++) {
    await step();
    await sample(`step ${s}`);
  }
  for (const l of held) await l.release();
  await holder.close();
  await client.close({ timeout: 1000 });
  if (srv) await srv.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
