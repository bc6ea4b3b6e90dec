'use strict';
// Every kind: semaphores, read-write locks, elections (observed as an async
// iterator), multi-locks; and inspect.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { redturn, uniq, sleep, until, sharedClient } = require('./helpers');

let url;
let client;
sharedClient((u, c) => {
  url = u;
  client = c;
}, { label: 'node-kinds' });

test('semaphore: two of two permits hold together, the third waits for one back', async () => {
  const name = uniq('sem');
  const a = await client.semaphore(name, { of: 2 });
  const b = await client.semaphore(name, { of: 2 });
  let third = false;
  const pc = client.semaphore(name, { of: 2 }).then((l) => { third = true; return l; });
  await sleep(100);
  assert.equal(third, false);
  const info = await client.inspect(name);
  assert.equal(info.kind, 'semaphore');
  assert.equal(info.permitsUsed, 2);
  assert.equal(info.holders.length, 2);
  assert.deepEqual(info.waiterPermits, [1]);
  assert.equal(info.holderLabel, 'node-kinds');
  await a.release();
  const c = await pc;
  assert.ok(c.fence > b.fence);
  await b.release();
  await c.release();
});

test('read-write lock: readers share, a writer waits for them, a reader behind the writer waits', async () => {
  const name = uniq('rw');
  const r1 = await client.readLock(name);
  const r2 = await client.readLock(name);
  const order = [];
  const pw = client.writeLock(name).then((l) => { order.push('w'); return l; });
  await sleep(30);
  const pr3 = client.readLock(name).then((l) => { order.push('r3'); return l; });
  await sleep(100);
  assert.deepEqual(order, []);
  assert.equal((await client.inspect(name)).kind, 'rwlock');
  await r1.release();
  await sleep(50);
  assert.deepEqual(order, []);
  await r2.release();
  const w = await pw;
  assert.deepEqual(order, ['w']);
  await w.release();
  const r3 = await pr3;
  assert.deepEqual(order, ['w', 'r3']);
  await r3.release();
});

test('election: observe is an async iterator of leader changes', async () => {
  const name = uniq('elect');
  const other = await redturn.connect(url);
  try {
    const ac = new AbortController();
    const seen = [];
    const watcher = (async () => {
      for await (const leader of other.observe(name, { signal: ac.signal })) {
        seen.push(leader && leader.value);
        if (seen.length === 5) break;
      }
    })();
    await sleep(100);
    const l1 = await client.campaign(name, 'node-1');
    const p2 = other.campaign(name, 'node-2');
    await sleep(50);
    await l1.proclaim('node-1b');
    await sleep(50);
    await l1.resign();
    const l2 = await p2;
    await sleep(50);
    await l2.resign();
    await watcher;
    // nobody, node-1, node-1b, node-2, and nobody again (the handoff from
    // node-1 to node-2 may or may not show nobody in between).
    assert.equal(seen[0], null);
    assert.deepEqual(seen.filter((v) => v !== null).slice(0, 3), ['node-1', 'node-1b', 'node-2']);
  } finally {
    await other.close();
  }
});

test('observe ends with the AbortSignal, and with the client\'s close', async () => {
  const name = uniq('elect-end');
  const c = await redturn.connect(url);
  const ac = new AbortController();
  const got = [];
  const it1 = (async () => { for await (const l of c.observe(name, { signal: ac.signal })) got.push(l); })();
  const it2 = (async () => { for await (const l of c.observe(name)) got.push(l); })();
  // Each observer first reports the state (nobody leads), then ends.
  assert.ok(await until(() => got.length >= 2, 10000), `${got.length} reports`);
  ac.abort();
  await it1;
  await c.close();
  await it2;
  assert.equal(got.length, 2);
});

test('multi-lock: all or nothing, fences for each', async () => {
  const a = uniq('multi-a');
  const b = uniq('multi-b');
  const other = await redturn.connect(url);
  try {
    const hb = await other.wait(b);
    let got = false;
    const pm = client.waitAll([a, b], { ttl: 5000 }).then((m) => { got = true; return m; });
    await sleep(100);
    assert.equal(got, false);
    await hb.release();
    const m = await pm;
    assert.equal(m.fences.length, 2);
    assert.ok(m.fences.every((f) => f > 0n));
    assert.equal(await other.tryLock(a), null);
    await m.release();
    const ta = await other.tryLock(a);
    assert.ok(ta);
    await ta.release();
    await assert.rejects(client.waitAll([a, a]), { code: 'RT_EINVAL' });
  } finally {
    await other.close();
  }
});

test('multi-lock: timeout and abort release what was taken', async () => {
  const a = uniq('multi-d-a');
  const b = uniq('multi-d-b');
  const hb = await client.wait(b);
  await assert.rejects(client.waitAll([a, b], { timeout: 150 }), { code: 'RT_EWAITTIMEOUT' });
  const ac = new AbortController();
  const p = client.waitAll([a, b], { signal: ac.signal });
  await sleep(100);
  ac.abort();
  await assert.rejects(p, { code: 'RT_ECANCELED' });
  assert.equal(await client.isLocked(a), false);
  await hb.release();
});
