'use strict';
// The README's Node.js example (examples/basic.js) runs, and the README
// shows it as it is.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { startRedis, pkgRoot } = require('./helpers');

const example = path.join(__dirname, '..', 'examples', 'basic.js');

test('examples/basic.js runs against a redis-server and exits by itself', async (t) => {
  let url = process.env.REDTURN_TEST_URL;
  if (!url) {
    const srv = await startRedis();
    t.after(() => srv.stop());
    url = srv.url;
  }
  // require('redturn') from the example finds the package under test.
  const pkgDir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'redturn-node-path.'));
  t.after(() => fs.rmSync(pkgDir, { recursive: true, force: true }));
  fs.symlinkSync(pkgRoot, path.join(pkgDir, 'redturn'));
  const out = execFileSync(process.execPath, [example], {
    env: Object.assign({}, process.env, { REDIS_URL: url, NODE_PATH: pkgDir }),
    timeout: 30000,
  }).toString();
  assert.match(out, /holding report:daily with fence \d+/);
  assert.match(out, /turns: a:\d+ b:\d+/);
  assert.match(out, /free now: true/);
});

test('the README shows examples/basic.js verbatim', (t) => {
  const readme = process.env.REDTURN_README || path.join(__dirname, '..', '..', '..', 'README.md');
  if (!fs.existsSync(readme)) return t.skip('README.md not found');
  const text = fs.readFileSync(readme, 'utf8');
  const body = fs.readFileSync(example, 'utf8').replace(/^\/\/.*\n/, '');
  assert.ok(text.includes(body.trim()), 'README.md lacks the body of examples/basic.js');
});
