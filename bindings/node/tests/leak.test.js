'use strict';
// No leak: 100 000 locks under --expose-gc; after a warm-up, the heap and
// the RSS stay flat (samples after a full GC at every tenth of the run).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { startRedis } = require('./helpers');

test('100 000 locks: heap and RSS stay stable', { timeout: 240000 }, async (t) => {
  let url = process.env.REDTURN_TEST_URL;
  if (!url) {
    const srv = await startRedis();
    t.after(() => srv.stop());
    url = srv.url;
  }
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', path.join(__dirname, 'leak-child.js'), url, '100000'],
      { timeout: 230000, maxBuffer: 1 << 20, cwd: process.cwd() }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(stdout);
      });
  });
  const r = JSON.parse(out.trim().split('\n').pop());
  t.diagnostic(`${r.total} locks in ${r.ms} ms; heap MB ${r.samples.map((s) => (s.heap / 1e6).toFixed(1)).join(' ')}; ` +
    `rss MB ${r.samples.map((s) => (s.rss / 1e6).toFixed(1)).join(' ')}`);
  assert.equal(r.total, 100000);
  assert.equal(r.held, 0);
  assert.ok(r.grants >= 100000);
  // From the 2nd sample (20 000 locks, warmed up) to the last: the heap
  // grows by less than 2 MB and the RSS by less than 16 MB, where a leak
  // of one small object per lock would add several MB and one native
  // allocation per lock several more.
  const warm = r.samples[1];
  const last = r.samples[r.samples.length - 1];
  assert.ok(last.heap - warm.heap < 2e6, `heap grew ${(last.heap - warm.heap) / 1e6} MB`);
  assert.ok(last.rss - warm.rss < 16e6, `rss grew ${(last.rss - warm.rss) / 1e6} MB`);
});

function child(t, args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', path.join(__dirname, 'leak-lost-child.js'), ...args],
      { timeout: 110000, maxBuffer: 1 << 20, cwd: process.cwd() }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()));
      });
  });
}

async function url(t) {
  if (process.env.REDTURN_TEST_URL) return process.env.REDTURN_TEST_URL;
  const srv = await startRedis();
  t.after(() => srv.stop());
  return srv.url;
}

test('20 000 leases that run out without release: no heap growth, stats().held back to 0', { timeout: 120000 }, async (t) => {
  const r = await child(t, ['lost', await url(t), '20000']);
  const mb = r.samples.map((s) => (s / 1e6).toFixed(1));
  t.diagnostic(`heap MB after each 1 000: ${mb.join(' ')}`);
  assert.equal(r.held, 0);
  // Warmed up after 4 000; a leak of the Lock and its native handle per
  // lease adds several MB over the 16 000 after.
  const grew = r.samples[r.samples.length - 1] - r.samples[3];
  assert.ok(grew < 2e6, `heap grew ${(grew / 1e6).toFixed(1)} MB`);
});

test('a dropped autoRenew Lock is released after GC: another client gets it within the 1 s lease', { timeout: 60000 }, async (t) => {
  const r = await child(t, ['dropped', await url(t)]);
  assert.equal(typeof r.grantedAfter, 'number', `the other client: ${r.grantedAfter}`);
  assert.ok(r.grantedAfter < 1000, `granted after ${r.grantedAfter} ms`);
});
