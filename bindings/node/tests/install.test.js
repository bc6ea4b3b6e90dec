'use strict';
// The npm package as a user gets it: what the tarball holds, an install on
// a PATH with only node and npm (the prebuilt binary, no compiler), the
// source build and what it says when a tool or package is missing, and
// what require() says when there is no binary.
//
// The tarball is REDTURN_NODE_TARBALL (scripts/test.sh passes the one it
// packed); without it, inside a checkout, the test packs one itself.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const { redisUrl, pkgRoot } = require('./helpers');

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'redturn-install-test.'));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

function which(cmd) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const file = path.join(dir, cmd);
    if (fs.existsSync(file)) return fs.realpathSync(file);
  }
  return null;
}
const npm = which('npm');

let tarball = process.env.REDTURN_NODE_TARBALL ? path.resolve(process.env.REDTURN_NODE_TARBALL) : null;
const checkout = path.join(pkgRoot, '..', '..');
before(() => {
  if (tarball || !npm || !fs.existsSync(path.join(checkout, 'include', 'redturn.h'))) return;
  const out = execFileSync(npm, ['pack', '--silent', '--pack-destination', scratch],
    { cwd: pkgRoot, encoding: 'utf8', timeout: 300000, stdio: ['ignore', 'pipe', 'inherit'] });
  tarball = path.join(scratch, out.trim().split('\n').pop());
});
const skip = (t) => {
  if (!npm) return t.skip('npm not found'), true;
  if (!tarball) return t.skip('no tarball: set REDTURN_NODE_TARBALL'), true;
  return false;
};

// A bin directory with node and npm only, and a fresh app directory.
let seq = 0;
function sandbox() {
  const dir = path.join(scratch, `app${++seq}`);
  const bin = path.join(dir, '.bin-only');
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  fs.symlinkSync(npm, path.join(bin, 'npm'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"app","private":true}\n');
  return { dir, bin, home: path.join(dir, '.home') };
}

// npm install of the tarball in box.dir; npm's script shell named by path,
// as PATH may have no sh. Returns the spawnSync result.
function npmInstall(box, env, extra = []) {
  return spawnSync(npm, ['install', '--offline', '--no-audit', '--no-fund',
    '--foreground-scripts', '--script-shell=/bin/sh', ...extra, tarball], {
    cwd: box.dir, encoding: 'utf8', timeout: 600000,
    env: Object.assign({ HOME: box.home, npm_config_cache: path.join(box.home, 'cache') }, env),
  });
}

function libs(file) {
  return execFileSync('ldd', [file], { encoding: 'utf8' });
}

// In box.dir, with PATH=bin: require('redturn'), take a lock, release it.
const takeLock = `
const redturn = require('redturn');
(async () => {
  const client = await redturn.connect(process.argv[1]);
  const lock = await client.wait('install-test:' + process.pid, { ttl: 5000, timeout: 5000 });
  console.log(JSON.stringify({ fence: String(lock.fence), addon: redturn.addonPath }));
  await lock.release();
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });`;

test('the tarball holds README.md, the prebuilt binary and nothing files names that is absent', (t) => {
  if (skip(t)) return;
  const [info] = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json', '--offline', tarball],
    { cwd: scratch, encoding: 'utf8', timeout: 300000 }));
  const files = info.files.map((f) => f.path);
  assert.ok(files.includes('README.md'), 'no README.md');
  assert.ok(files.includes('prebuilds/linux-x64/redturn.node'), 'no prebuilt binary');
  const box = sandbox();
  execFileSync('tar', ['xzf', tarball, '-C', box.dir, 'package/package.json']);
  const meta = JSON.parse(fs.readFileSync(path.join(box.dir, 'package', 'package.json'), 'utf8'));
  for (const entry of meta.files) {
    const e = entry.replace(/\/$/, '');
    assert.ok(files.some((f) => f === e || f.startsWith(e + '/')), `files lists ${entry}, which the tarball lacks`);
  }
  // The npm README shows examples/basic.js as it is.
  const example = fs.readFileSync(path.join(__dirname, '..', 'examples', 'basic.js'), 'utf8');
  execFileSync('tar', ['xzf', tarball, '-C', box.dir, 'package/README.md']);
  assert.ok(fs.readFileSync(path.join(box.dir, 'package', 'README.md'), 'utf8').includes(example.trim()),
    "the package's README.md lacks examples/basic.js");
});

test('the tarball has the MIT LICENSE of the project, and package.json says MIT', (t) => {
  if (skip(t)) return;
  const [info] = JSON.parse(execFileSync(npm, ['pack', '--dry-run', '--json', '--offline', tarball],
    { cwd: scratch, encoding: 'utf8', timeout: 300000 }));
  assert.ok(info.files.some((f) => f.path === 'LICENSE'), 'no LICENSE');
  const box = sandbox();
  execFileSync('tar', ['xzf', tarball, '-C', box.dir, 'package/package.json', 'package/LICENSE']);
  const meta = JSON.parse(fs.readFileSync(path.join(box.dir, 'package', 'package.json'), 'utf8'));
  assert.equal(meta.license, 'MIT');
  const text = fs.readFileSync(path.join(box.dir, 'package', 'LICENSE'), 'utf8');
  assert.match(text, /^MIT License\n\nCopyright \(c\) \d{4} the redturn authors\n/);
  assert.match(text, /THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND/);
  // Inside a checkout: the project's own LICENSE, as it is.
  const own = path.join(checkout, 'LICENSE');
  if (fs.existsSync(own)) assert.equal(text, fs.readFileSync(own, 'utf8'));
});

test('npm install on a PATH of node and npm only: the prebuilt binary, self-contained, takes a lock',
  { timeout: 300000 }, async (t) => {
    if (skip(t)) return;
    const url = await redisUrl(t);
    const box = sandbox();
    const r = npmInstall(box, { PATH: box.bin });
    assert.equal(r.status, 0, `npm install failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout + r.stderr, /using the prebuilt prebuilds\/linux-x64\/redturn\.node/);
    const run = spawnSync(process.execPath, ['-e', takeLock, url],
      { cwd: box.dir, encoding: 'utf8', timeout: 300000, env: { PATH: box.bin } });
    assert.equal(run.status, 0, run.stderr);
    const out = JSON.parse(run.stdout);
    assert.ok(BigInt(out.fence) > 0n);
    assert.equal(out.addon, path.join(fs.realpathSync(box.dir), 'node_modules', 'redturn',
      'prebuilds', 'linux-x64', 'redturn.node'));
    const deps = libs(out.addon);
    assert.doesNotMatch(deps, /libhiredis|libssl|libcrypto|libuuid|libuv/, deps);
  });

test('npm install --build-from-source builds a self-contained redturn.node that takes a lock',
  { timeout: 600000 }, async (t) => {
    if (skip(t)) return;
    const url = await redisUrl(t);
    const box = sandbox();
    const r = npmInstall(box, { PATH: process.env.PATH }, ['--build-from-source']);
    assert.equal(r.status, 0, `npm install failed:\n${r.stdout}\n${r.stderr}`);
    const built = path.join(fs.realpathSync(box.dir), 'node_modules', 'redturn', 'build', 'redturn.node');
    const deps = libs(built);
    assert.doesNotMatch(deps, /libhiredis|libssl|libcrypto|libuuid|libuv/, deps);
    const run = spawnSync(process.execPath, ['-e', takeLock, url],
      { cwd: box.dir, encoding: 'utf8', timeout: 300000, env: { PATH: box.bin } });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(JSON.parse(run.stdout).addon, built);
  });

test('a source build without the tools names each one and its Debian package', { timeout: 120000 }, (t) => {
  if (skip(t)) return;
  const box = sandbox();
  const r = npmInstall(box, { PATH: box.bin }, ['--ignore-scripts']);
  assert.equal(r.status, 0, r.stderr);
  const script = path.join(box.dir, 'node_modules', 'redturn', 'scripts', 'build.js');

  // PATH: node and npm only.
  let b = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60000,
    env: { PATH: box.bin, REDTURN_BUILD_FROM_SOURCE: '1' } });
  assert.equal(b.status, 1);
  for (const [what, deb] of [['cmake', 'cmake'], ['a C compiler', 'gcc'], ['make', 'make'],
    ['pkg-config', 'pkg-config'], ['hiredis', 'libhiredis-dev']]) {
    assert.ok(b.stderr.includes(`  ${what}`) && b.stderr.includes(`Debian package ${deb}`),
      `no line for ${what} / ${deb}:\n${b.stderr}`);
  }
  assert.match(b.stderr, /apt-get install cmake gcc make pkg-config libhiredis-dev/);
  assert.match(b.stderr, /npm rebuild redturn/);

  // Every tool there, but pkg-config finds no hiredis.
  const empty = path.join(box.dir, '.no-pc');
  fs.mkdirSync(empty);
  b = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60000,
    env: Object.assign({}, process.env, { REDTURN_BUILD_FROM_SOURCE: '1', PKG_CONFIG_LIBDIR: empty, PKG_CONFIG_PATH: '' }) });
  assert.equal(b.status, 1);
  assert.match(b.stderr, /hiredis \(pkg-config finds no hiredis\.pc\): Debian package libhiredis-dev/);
  assert.doesNotMatch(b.stderr, /cmake: Debian/);
  assert.ok(!fs.existsSync(path.join(box.dir, 'node_modules', 'redturn', 'build')), 'a build was started');
});

test('without a binary, require says to run npm rebuild redturn and looks nowhere in the app', (t) => {
  if (skip(t)) return;
  const box = sandbox();
  const r = npmInstall(box, { PATH: box.bin }, ['--ignore-scripts']);
  assert.equal(r.status, 0, r.stderr);
  // --ignore-scripts: the prebuilt binary loads all the same.
  let run = spawnSync(process.execPath, ['-p', "require('redturn').addonPath"],
    { cwd: box.dir, encoding: 'utf8', timeout: 60000, env: { PATH: box.bin } });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /prebuilds\/linux-x64\/redturn\.node/);

  fs.rmSync(path.join(box.dir, 'node_modules', 'redturn', 'prebuilds'), { recursive: true });
  run = spawnSync(process.execPath, ['-e', "require('redturn')"],
    { cwd: box.dir, encoding: 'utf8', timeout: 60000, env: { PATH: box.bin } });
  assert.notEqual(run.status, 0);
  assert.match(run.stderr, /Run `npm rebuild redturn`/);
  assert.ok(!run.stderr.includes(path.join(fs.realpathSync(box.dir), 'build')), run.stderr);
  assert.ok(!run.stderr.includes(path.join(box.dir, 'build')), run.stderr);
});
