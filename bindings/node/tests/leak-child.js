'use strict';
// Run by leak.test.js with --expose-gc: rounds of the three things a
// service does all day, through 8 lanes at a time: wait + release cycles
// (a tryLock on the held name every 100th), waits aborted by their
// AbortSignal while another client holds the resource, and Locks dropped
// without release (FinalizationRegistry releases them once collected).
// Warm-up rounds first, then the heap and RSS after a full GC at the end of
// every measured round; prints one JSON line.
const { redturn, sleep } = require('./helpers');

async function main() {
  const [url, roundsArg, cyclesArg, abortedArg, droppedArg, warmArg] = process.argv.slice(2);
  const warmRounds = Number(warmArg || 4);
  const rounds = Number(roundsArg || 8);
  const cycles = Number(cyclesArg || 10000);
  const aborted = Number(abortedArg || 2500);
  const dropped = Number(droppedArg || 1000);
  const lanes = 8;
  const client = await redturn.connect(url);
  const holder = await redturn.connect(url);
  const tag = `node-leak:${process.pid}`;
  const held = [];
  for (let i = 0; i < lanes; i++) held.push(await holder.wait(`${tag}:held:${i}`, { ttl: 60000, autoRenew: true }));

  let seq = 0;
  const lane = (n, fn) => Promise.all(Array.from({ length: lanes }, async (_, i) => {
    for (let k = i; k < n; k += lanes) await fn(i, k);
  }));
  const cycle = async (i, k) => {
    const name = `${tag}:c:${i}`;
    const l = await client.wait(name, { ttl: 10000 });
    if (k % 100 === 0 && (await client.tryLock(name)) !== null) throw new Error('tryLock got a held lock');
    await l.release();
  };
  const abort = async (i) => {
    const ac = new AbortController();
    const w = client.wait(`${tag}:held:${i}`, { signal: ac.signal });
    setImmediate(() => ac.abort());
    await w.then(() => { throw new Error('granted a held lock'); }, (e) => {
      if (e.code !== 'RT_ECANCELED') throw e;
    });
  };
  const drop = async () => {
    await client.wait(`${tag}:d:${seq++}`, { ttl: 60000 });
  };
  const samples = [];
  const t0 = Date.now();
  for (let r = 0; r < warmRounds + rounds; r++) {
    await lane(cycles, cycle);
    await lane(aborted, abort);
    await lane(dropped, drop);
    if (r < warmRounds - 1) continue;
    global.gc();
    await sleep(20); // the releases of the collected Locks go out
    global.gc();
    const m = process.memoryUsage();
    samples.push({ heap: m.heapUsed, heapTotal: m.heapTotal, rss: m.rss });
  }
  const ms = Date.now() - t0;
  for (let i = 0; i < 50 && client.stats().held > 0; i++) {
    global.gc();
    await sleep(20);
  }
  const stats = client.stats();
  for (const l of held) await l.release();
  await holder.close();
  await client.close();
  console.log(JSON.stringify({
    ms, samples, ops: (warmRounds + rounds) * (cycles + aborted + dropped),
    grants: stats.grants, cancels: stats.cancels, held: stats.held, pending: stats.pending,
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
