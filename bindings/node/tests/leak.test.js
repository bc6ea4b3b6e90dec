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
