'use strict';
// Run by leak.test.js with --expose-gc. Mode "lost": 20 000 leases on
// distinct names run out without release (1 000 at a time), sampling the
// heap after a full GC; mode "dropped": an autoRenew Lock is dropped, and
// another client waits for its resource. Prints one JSON line.
const { redturn } = require('./helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function lost(url, total) {
  const client = await redturn.connect(url);
  const batch = 1000;
  const samples = [];
  for (let done = 0; done < total; done += batch) {
    const all = [];
    for (let i = 0; i < batch; i++) {
      all.push(client.wait(`node-leak-lost:${process.pid}:${done + i}`, { ttl: 100 })
        .then((l) => new Promise((resolve) => l.once('lost', () => resolve()))));
    }
    await Promise.all(all);
    await sleep(10);
    global.gc();
    samples.push(process.memoryUsage().heapUsed);
  }
  await sleep(50);
  global.gc();
  samples.push(process.memoryUsage().heapUsed);
  const held = client.stats().held;
  await client.close();
  return { samples, held };
}

async function dropped(url) {
  const name = `node-leak-dropped:${process.pid}`;
  const a = await redturn.connect(url);
  const b = await redturn.connect(url);
  await (async () => {
    await a.wait(name, { ttl: 1000, autoRenew: true }); // dropped at once
  })();
  const t0 = Date.now();
  let grantedAfter = null;
  const w = b.wait(name, { timeout: 4000 }).then((l) => { grantedAfter = Date.now() - t0; return l.release(); },
    (e) => { grantedAfter = `${e.code} after ${Date.now() - t0} ms`; });
  for (let i = 0; i < 20 && grantedAfter === null; i++) {
    global.gc();
    await sleep(50);
  }
  await w;
  await a.close({ timeout: 0 });
  await b.close();
  return { grantedAfter };
}

(async () => {
  const [mode, url, n] = process.argv.slice(2);
  const r = mode === 'lost' ? await lost(url, Number(n || 20000)) : await dropped(url);
  console.log(JSON.stringify(r));
})().catch((e) => { console.error(e); process.exit(1); });
