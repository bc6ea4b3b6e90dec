'use strict';
// Run by leak.test.js with --expose-gc: 100 000 locks (wait + release, 8
// at a time on 8 resources, plus a tryLock in every 100th round), sampling
// the heap and RSS after a full GC; prints one JSON line.
const { redturn } = require('./helpers');

async function main() {
  const url = process.argv[2];
  const total = Number(process.argv[3] || 100000);
  const client = await redturn.connect(url);
  const lanes = 8;
  const per = total / lanes;
  const samples = [];
  const sample = (done) => {
    global.gc();
    const m = process.memoryUsage();
    samples.push({ done, heap: m.heapUsed, rss: m.rss, external: m.external });
  };
  let done = 0;
  const lane = async (i) => {
    const name = `node-leak:${process.pid}:${i}`;
    for (let k = 0; k < per; k++) {
      const l = await client.wait(name, { ttl: 10000 });
      if (k % 100 === 0) {
        const t = await client.tryLock(name);
        if (t !== null) throw new Error('tryLock got a held lock');
      }
      await l.release();
      done++;
    }
  };
  const t0 = Date.now();
  const timer = setInterval(() => {}, 1000);
  const run = Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  // Samples at every tenth of the run, taken between rounds.
  let next = total / 10;
  while (done < total) {
    await new Promise((r) => setTimeout(r, 20));
    if (done >= next) {
      sample(done);
      next += total / 10;
    }
  }
  await run;
  clearInterval(timer);
  sample(done);
  const stats = client.stats();
  await client.close();
  console.log(JSON.stringify({ total: done, ms: Date.now() - t0, samples, grants: stats.grants, held: stats.held }));
}

main().catch((e) => { console.error(e); process.exit(1); });
