'use strict';
// index.d.ts under tsc --strict: tests/types/usage.ts uses the API as
// lib/index.js offers it. Needs typescript and @types/node, found from the
// package, the working directory, or REDTURN_TSC_DIR (a directory whose
// node_modules has them); skips with the reason when they are absent.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { execFileSync } = require('node:child_process');
const { pkgRoot } = require('./helpers');

function find(id) {
  const paths = [path.join(__dirname, '..'), process.cwd(), process.env.REDTURN_TSC_DIR].filter(Boolean);
  try {
    return require.resolve(id, { paths });
  } catch {
    return null;
  }
}

const tsc = find('typescript/bin/tsc');
const nodeTypes = find('@types/node/package.json');

test('index.d.ts: tsc --strict accepts typed use of the API', {
  skip: !tsc || !nodeTypes ? 'typescript and @types/node not installed (npm install typescript @types/node, or set REDTURN_TSC_DIR)' : false,
}, (t) => {
  // The index.d.ts of the package under test (installed, or this tree).
  const dts = path.join(pkgRoot, 'index.d.ts');
  assert.ok(fs.existsSync(dts), dts);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redturn-types.'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const usage = path.join(dir, 'usage.ts');
  fs.writeFileSync(usage, fs.readFileSync(path.join(__dirname, 'types', 'usage.ts'), 'utf8')
    .replaceAll("'../../index'", JSON.stringify(dts.replace(/\.d\.ts$/, ''))));
  const typeRoots = path.dirname(path.dirname(nodeTypes));
  try {
    execFileSync(process.execPath, [tsc, '--strict', '--noEmit', '--target', 'es2022', '--module', 'commonjs',
      '--lib', 'es2022,esnext.disposable', '--typeRoots', typeRoots, '--types', 'node', usage],
    { stdio: 'pipe' });
  } catch (err) {
    assert.fail(`tsc --strict failed:\n${err.stdout}${err.stderr}`);
  }
});
