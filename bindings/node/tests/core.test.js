'use strict';
// The redturn.ts seed's cases, on the addon against a real redis-server.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { redturn, uniq, sleep, sharedClient } = require('./helpers');

let url;
let client;
sharedClient((u, c) => {
  url = u;
  client = c;
});

test('wait: an idle lock is granted at once, with a fence and a lease', async () => {
  const name = uniq('wait');
  const lock = await client.wait(name, { ttl: 5000 });
  assert.equal(lock.state, 'held');
  assert.equal(typeof lock.fence, 'bigint');
  assert.ok(lock.fence > 0n);
  assert.ok(lock.leaseLeft > 0 && lock.leaseLeft <= 5000);
  assert.match(lock.id, /^[0-9a-f]{32}:\d+$/);
  assert.equal(await client.isLocked(name), true);
  await lock.release();
  assert.equal(lock.state, 'released');
  assert.equal(await client.isLocked(name), false);
});

test('wait then signal: the waiter gets the lock when the holder releases', async () => {
  const name = uniq('signal');
  const a = await client.wait(name);
  let granted = false;
  const pb = client.wait(name).then((l) => { granted = true; return l; });
  await sleep(100);
  assert.equal(granted, false);
  await a.release();
  const b = await pb;
  assert.ok(b.fence > a.fence);
  await b.release();
});

test('two waits hand off in order', async () => {
  const name = uniq('order');
  const a = await client.wait(name);
  const order = [];
  const pb = client.wait(name).then((l) => { order.push('b'); return l; });
  await sleep(20);
  const pc = client.wait(name).then((l) => { order.push('c'); return l; });
  await sleep(50);
  const info = await client.inspect(name);
  assert.equal(info.queueLength, 3);
  await a.release();
  const b = await pb;
  assert.deepEqual(order, ['b']);
  await b.release();
  const c = await pc;
  assert.deepEqual(order, ['b', 'c']);
  assert.ok(c.fence > b.fence);
  await c.release();
});

test('a skipped entry: a waiter that gave up is passed over', async () => {
  const name = uniq('skip');
  const a = await client.wait(name);
  const pb = client.wait(name, { timeout: 150 });
  await sleep(20);
  const pc = client.wait(name);
  await assert.rejects(pb, { code: 'RT_EWAITTIMEOUT' });
  await a.release();
  const c = await pc;
  assert.equal(c.state, 'held');
  await c.release();
});

test('two clients: a lock held by one is waited for by the other', async () => {
  const name = uniq('two');
  const other = await redturn.connect(url);
  try {
    assert.notEqual(other.id, client.id);
    const a = await client.wait(name);
    assert.equal(await other.tryLock(name), null);
    const pb = other.wait(name);
    await sleep(50);
    const info = await client.inspect(name);
    assert.equal(info.holderClient, client.id);
    await a.release();
    const b = await pb;
    const info2 = await client.inspect(name);
    assert.equal(info2.holderClient, other.id);
    await b.release();
  } finally {
    await other.close();
  }
});

test('an expired head is cleared: the next waiter gets the lock when the lease ends', async () => {
  const name = uniq('expired');
  const other = await redturn.connect(url);
  try {
    const a = await other.wait(name, { ttl: 300 });
    const lost = new Promise((resolve) => a.on('lost', resolve));
    const t0 = Date.now();
    const b = await client.wait(name, { timeout: 10000 });
    assert.ok(Date.now() - t0 >= 200, 'granted before the lease ended');
    const err = await lost;
    assert.equal(err.code, 'RT_ELOST');
    assert.equal(a.lost, true);
    await assert.rejects(a.release(), { code: 'RT_ELOST' });
    await b.release();
  } finally {
    await other.close();
  }
});

test('extend: the lease is pushed forward, and a waiter waits past the first TTL', async () => {
  const name = uniq('extend');
  const a = await client.wait(name, { ttl: 400 });
  await a.extend(3000);
  assert.ok(a.leaseLeft > 2000);
  const pb = client.wait(name, { timeout: 800 });
  await assert.rejects(pb, { code: 'RT_EWAITTIMEOUT' });
  assert.equal(await a.isOwned(), true);
  await a.release();
  await assert.rejects(a.extend(1000), { code: 'RT_ERELEASED' });
});

test('1000 sequential locks', async () => {
  const name = uniq('seq');
  let last = 0n;
  for (let i = 0; i < 1000; i++) {
    const l = await client.wait(name);
    assert.ok(l.fence > last);
    last = l.fence;
    await l.release();
  }
  assert.equal(await client.isLocked(name), false);
});

test('1000 concurrent locks: granted one at a time, in request order', async () => {
  const name = uniq('conc');
  let holders = 0;
  let overlaps = 0;
  const order = [];
  const jobs = [];
  for (let i = 0; i < 1000; i++) {
    jobs.push(client.wait(name).then(async (l) => {
      holders++;
      if (holders > 1) overlaps++;
      order.push(i);
      await new Promise((r) => setImmediate(r));
      holders--;
      await l.release();
    }));
  }
  await Promise.all(jobs);
  assert.equal(overlaps, 0);
  assert.equal(order.length, 1000);
  assert.deepEqual(order, [...order].sort((x, y) => x - y), 'FIFO order');
});

test('tryLock: null when held, a lock when free', async () => {
  const name = uniq('try');
  const a = await client.tryLock(name);
  assert.ok(a);
  assert.equal(await client.tryLock(name), null);
  await a.release();
  const b = await client.tryLock(name);
  assert.ok(b);
  await b.release();
});

test('withLock: runs the body under the lock, releases after, also when it throws', async () => {
  const name = uniq('with');
  const r = await client.withLock(name, async (lock) => {
    assert.equal(await client.isLocked(name), true);
    assert.ok(lock.fence > 0n);
    return 42;
  });
  assert.equal(r, 42);
  assert.equal(await client.isLocked(name), false);
  await assert.rejects(client.withLock(name, async () => { throw new Error('boom'); }), /boom/);
  assert.equal(await client.isLocked(name), false);
});

test('auto-renew keeps a short lease alive', async () => {
  // Three leases long; a lease of 1 s leaves a renewal (every third of it)
  // room on a loaded machine, where 300 ms ran out.
  const name = uniq('renew');
  const a = await client.wait(name, { ttl: 1000, autoRenew: true });
  let lost = false;
  a.on('lost', () => { lost = true; });
  await sleep(3000);
  assert.equal(lost, false);
  assert.equal(await a.isOwned(), true);
  await a.release();
});

test('bad arguments throw errors with the library code', async () => {
  await assert.rejects(client.wait('', {}), { code: 'RT_ENAMEEMPTY' });
  await assert.rejects(client.wait('x', { ttl: 0 }), { code: 'RT_ETTL' });
  await assert.rejects(client.wait('x', { kind: 'nope' }), { code: 'RT_EINVAL' });
  await assert.rejects(client.wait('x'.repeat(5000)), { code: 'RT_ENAMETOOLONG' });
  await assert.rejects(redturn.connect('redis://127.0.0.1:99999'), (e) => {
    assert.equal(e.code, 'RT_EURL');
    assert.match(e.message, /port/);
    return true;
  });
});
