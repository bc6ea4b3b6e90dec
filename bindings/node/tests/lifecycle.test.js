'use strict';
// Abort and timeout, lost-lock events, a busy event loop, close with
// pending waits, errors carrying Redis's text, worker threads, one libuv.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const { execFileSync } = require('node:child_process');
const { redturn, uniq, sleep, busy, sharedClient } = require('./helpers');

let url;
let client;
sharedClient((u, c) => {
  url = u;
  client = c;
});

test('an AbortSignal cancels a pending wait, and its entry leaves the queue', async () => {
  const name = uniq('abort');
  const a = await client.wait(name);
  const ac = new AbortController();
  const pb = client.wait(name, { signal: ac.signal });
  await sleep(50);
  assert.equal((await client.inspect(name)).queueLength, 2);
  ac.abort(new Error('user gave up'));
  await assert.rejects(pb, (e) => {
    assert.equal(e.code, 'RT_ECANCELED');
    assert.equal(e.name, 'AbortError');
    assert.match(String(e.cause), /user gave up/);
    return true;
  });
  assert.equal((await client.inspect(name)).queueLength, 1);
  await assert.rejects(client.wait(name, { signal: ac.signal }), { code: 'RT_ECANCELED' });
  await a.release();
  assert.equal(await client.isLocked(name), false);
});

test('AbortSignal.timeout and a Date timeout', async () => {
  const name = uniq('deadline');
  const a = await client.wait(name);
  const t0 = Date.now();
  await assert.rejects(client.wait(name, { signal: AbortSignal.timeout(100) }), { code: 'RT_ECANCELED' });
  await assert.rejects(client.wait(name, { timeout: new Date(Date.now() + 100) }), { code: 'RT_EWAITTIMEOUT' });
  assert.ok(Date.now() - t0 >= 150);
  assert.equal((await client.inspect(name)).queueLength, 1);
  await a.release();
});

test('lost-lock event: a lease that runs out emits lost, and release reports RT_ELOST', async () => {
  const name = uniq('lost');
  const a = await client.wait(name, { ttl: 200 });
  const err = await new Promise((resolve) => a.on('lost', resolve));
  assert.equal(err.code, 'RT_ELOST');
  assert.equal(a.lost, true);
  assert.equal(a.state, 'lost');
  // 'lost' comes by the client's conservative view of Redis's clock (behind
  // it by up to a round trip), so Redis may hold the lease a moment longer.
  const t0 = Date.now();
  while (await client.isLocked(name)) {
    assert.ok(Date.now() - t0 < 1000, 'Redis still holds the lock 1 s after lost');
    await sleep(5);
  }
  await assert.rejects(a.release(), { code: 'RT_ELOST' });
});

test('a busy event loop: renewals catch up, and handoffs are delivered after the block', async () => {
  const name = uniq('busy');
  const other = await redturn.connect(url);
  try {
    const a = await client.wait(name, { ttl: 1500, autoRenew: true });
    let lost = false;
    a.on('lost', () => { lost = true; });
    for (let i = 0; i < 4; i++) {
      busy(300);
      await sleep(50);
    }
    assert.equal(lost, false);
    assert.equal(await a.isOwned(), true);
    const pb = other.wait(name);
    await sleep(50);
    const releasing = a.release();
    busy(300); // the grant notice arrives while the loop is blocked
    await releasing;
    const b = await pb;
    assert.equal(b.state, 'held');
    await b.release();
  } finally {
    await other.close();
  }
});

test('close with pending waits: they reject RT_ECANCELED, held locks are force-released in Redis', async () => {
  const name = uniq('close');
  const c = await redturn.connect(url);
  const held = await c.wait(name);
  let lost = null;
  held.on('lost', (e) => { lost = e; });
  const pending = [c.wait(name), c.wait(name), c.waitAll([name, name + ':2'])];
  await sleep(50);
  const settled = Promise.allSettled(pending);
  const closed = c.close({ timeout: 0 });
  for (const r of await settled) assert.equal(r.reason && r.reason.code, 'RT_ECANCELED');
  await closed;
  assert.equal(lost && lost.code, 'RT_ELOST');
  assert.equal(held.lost, true);
  assert.equal(await client.isLocked(name), false);
  assert.equal((await client.inspect(name)).queueLength, 0);
  await assert.rejects(c.wait(name), { code: 'RT_ECLOSED' });
  await assert.rejects(held.release(), { code: 'RT_ELOST' });
  assert.equal(await c.close(), undefined);
});

test('graceful close: a running withLock body keeps its lock until it finishes; new requests reject RT_ECLOSED', async () => {
  const name = uniq('graceful');
  const c = await redturn.connect(url);
  const events = [];
  let entered;
  const inBody = new Promise((r) => { entered = r; });
  const body = c.withLock(name, async (lock, signal) => {
    entered();
    await sleep(400);
    events.push(['body-end', lock.lost, signal.aborted]);
    return 'done';
  });
  await inBody;
  const closed = c.close();
  await assert.rejects(c.wait(uniq('x')), (e) => {
    assert.ok(e instanceof redturn.RedturnError);
    assert.equal(e.code, 'RT_ECLOSED');
    return true;
  });
  const other = await redturn.connect(url);
  try {
    const l = await other.wait(name, { timeout: 5000 });
    events.push(['other-granted']);
    await l.release();
    assert.equal(await body, 'done');
    await closed;
    assert.deepEqual(events, [['body-end', false, false], ['other-granted']]);
  } finally {
    await other.close();
  }
});

test('close({ timeout }) force-releases: lost and the body\'s signal come before another client is granted', async () => {
  const name = uniq('forced');
  const c = await redturn.connect(url);
  const events = [];
  let entered;
  const inBody = new Promise((r) => { entered = r; });
  const body = c.withLock(name, async (lock, signal) => {
    lock.on('lost', (e) => events.push(['lost', e.code, lock.lost]));
    signal.addEventListener('abort', () => events.push(['aborted']));
    entered();
    await sleep(1500);
  });
  await inBody;
  const other = await redturn.connect(url);
  try {
    const waiting = other.wait(name, { timeout: 5000 }).then((l) => { events.push(['other-granted']); return l; });
    await sleep(50);
    const t0 = Date.now();
    await c.close({ timeout: 200 });
    assert.ok(Date.now() - t0 >= 150, 'close waited for its timeout');
    const l = await waiting;
    await l.release();
    assert.deepEqual(events, [['lost', 'RT_ELOST', true], ['aborted'], ['other-granted']]);
    await assert.rejects(body, { code: 'RT_ELOST' });
  } finally {
    await other.close();
  }
});

test('closeOnSignals: SIGTERM releases the held lock at once and the process exits by the signal', async () => {
  const name = uniq('sigterm');
  const script = `
    const redturn = require(${JSON.stringify(require.resolve('./helpers'))}).redturn;
    (async () => {
      const c = await redturn.connect(${JSON.stringify(url)});
      c.closeOnSignals({ timeout: 100 });
      await c.wait(${JSON.stringify(name)}, { ttl: 60000 });
      console.log('held');
      setInterval(() => {}, 1000);
    })();`;
  const { spawn } = require('node:child_process');
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve(sig)));
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { if (/held/.test(d)) resolve(); });
    exited.then((sig) => reject(new Error(`child exited before holding the lock (${sig})`)));
  });
  child.kill('SIGTERM');
  const t0 = Date.now();
  const l = await client.wait(name, { timeout: 10000 });
  assert.ok(Date.now() - t0 < 5000, 'granted long before the 60 s lease ended');
  await l.release();
  assert.equal(await exited, 'SIGTERM');
});

test('close lets the process exit: nothing keeps the loop alive afterwards', () => {
  const script = `
    const redturn = require(${JSON.stringify(require.resolve('./helpers'))}).redturn;
    (async () => {
      const c = await redturn.connect(${JSON.stringify(url)});
      const l = await c.wait('${uniq('exit')}');
      c.wait('${uniq('exit2')}');
      await l.release();
      await c.close({ timeout: 0 }); // exit2's lock, granted and never released, is force-released
      console.log('closed');
    })();`;
  const t0 = Date.now();
  const out = execFileSync(process.execPath, ['-e', script], { timeout: 20000 }).toString();
  assert.match(out, /closed/);
  assert.ok(Date.now() - t0 < 15000);
});

test('errors carry the library code and Redis\'s own text', async () => {
  await assert.rejects(redturn.connect(url, { username: 'nobody', password: 'not-the-password' }), (e) => {
    assert.equal(e.code, 'RT_EAUTH');
    assert.ok(e instanceof Error);
    assert.match(e.message, /^Redis authentication failed: AUTH: WRONGPASS invalid username-password pair/);
    return true;
  });
  const port = await require('./helpers').freePort();
  await assert.rejects(redturn.connect(`redis://127.0.0.1:${port}`, { connectTimeout: 2000 }), (e) => {
    assert.equal(e.code, 'RT_ECONNECT');
    assert.match(e.message, /refused/i);
    return true;
  });
  await assert.rejects(redturn.connect('unix:///tmp/x'), { code: 'RT_EURL' });
});

test('a kind mismatch is RT_EKIND', async () => {
  const name = uniq('kind');
  const a = await client.semaphore(name, { of: 3 });
  await assert.rejects(client.wait(name), { code: 'RT_EKIND' });
  await a.release();
});

test('worker threads: each runs its own client on its own loop; terminating one releases its locks', async () => {
  const name = uniq('worker');
  const helpers = require.resolve('./helpers');
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { redturn } = require(${JSON.stringify(helpers)});
    (async () => {
      const c = await redturn.connect(workerData.url);
      const l = await c.wait(workerData.name, { ttl: 60000 });
      parentPort.postMessage({ fence: String(l.fence), id: c.id });
      if (workerData.release) { await l.release(); await c.close(); parentPort.postMessage('done'); }
    })().catch((e) => parentPort.postMessage({ error: e.code + ' ' + e.message }));`;
  // A worker that locks, releases and closes, and exits by itself.
  const w1 = new Worker(code, { eval: true, workerData: { url, name, release: true } });
  const msgs = [];
  w1.on('message', (m) => msgs.push(m));
  const exit1 = await new Promise((resolve) => w1.on('exit', resolve));
  assert.equal(exit1, 0);
  assert.ok(msgs[0].fence, JSON.stringify(msgs));
  assert.equal(msgs[1], 'done');
  // A worker terminated while it holds a 60 s lock: its environment's
  // cleanup closes the client, which releases the lock in Redis.
  const w2 = new Worker(code, { eval: true, workerData: { url, name, release: false } });
  const m = await new Promise((resolve) => w2.on('message', resolve));
  assert.ok(m.fence, JSON.stringify(m));
  assert.equal((await client.inspect(name)).holderClient, m.id);
  await w2.terminate();
  const l = await client.wait(name, { timeout: 5000 });
  await l.release();
});

test('one libuv: the addon leaves uv_* to the node binary and links no libuv', () => {
  const addon = redturn.addonPath;
  const syms = execFileSync('nm', ['-D', addon], { maxBuffer: 1 << 26 }).toString();
  assert.match(syms, /\s+U uv_run$/m);
  assert.match(syms, /\s+U uv_tcp_init$/m);
  assert.doesNotMatch(syms, /\s+T uv_/);
  const deps = execFileSync('ldd', [addon]).toString();
  assert.doesNotMatch(deps, /libuv/);
  const nodeSyms = execFileSync('nm', ['-D', process.execPath], { maxBuffer: 1 << 28 }).toString();
  assert.match(nodeSyms, /\s+T uv_run$/m);
});
