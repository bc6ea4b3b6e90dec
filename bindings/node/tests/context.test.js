'use strict';
// 'lost' listeners run in the AsyncLocalStorage context of the request
// that took the lock; one AbortSignal shared by many waits adds one listener.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { AsyncLocalStorage } = require('node:async_hooks');
const { uniq, sleep, sharedClient } = require('./helpers');

let client;
sharedClient((url, c) => {
  client = c;
});

test("'lost' and lock.signal's abort run in the AsyncLocalStorage context of the wait", async () => {
  const als = new AsyncLocalStorage();
  const name = uniq('als');
  const lock = await als.run({ request: 'r1' }, () => client.wait(name, { ttl: 200 }));
  const seen = await new Promise((resolve) => {
    const got = {};
    lock.on('lost', () => { got.lost = als.getStore(); });
    lock.signal.addEventListener('abort', () => { got.abort = als.getStore(); resolve(got); });
  });
  assert.deepEqual(seen.lost, { request: 'r1' });
  assert.deepEqual(seen.abort, { request: 'r1' });
});

test('one AbortSignal shared by 20 waits: no MaxListenersExceededWarning, and abort cancels them all', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    const name = uniq('shared-signal');
    const held = await client.wait(name);
    const ac = new AbortController();
    const waits = Array.from({ length: 20 }, () => client.wait(name, { signal: ac.signal }));
    const settled = Promise.allSettled(waits);
    await sleep(100);
    assert.equal((await client.inspect(name)).queueLength, 21);
    ac.abort();
    for (const r of await settled) assert.equal(r.reason && r.reason.code, 'RT_ECANCELED');
    await sleep(50);
    assert.equal((await client.inspect(name)).queueLength, 1);
    await held.release();
    assert.deepEqual(warnings.map((w) => `${w.name}: ${w.message}`), []);
  } finally {
    process.off('warning', onWarning);
  }
});
