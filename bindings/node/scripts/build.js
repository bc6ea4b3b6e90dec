'use strict';
// npm install (and `npm rebuild redturn`): use the prebuilt binary that
// `npm pack` put in prebuilds/<platform>-<arch>/ when it loads in this
// Node.js (checked in a child process, every symbol bound), else build
// build/redturn.node with CMake from the bundled sources (deps/redturn/, or
// this checkout's when run inside the repository), against the headers of
// the Node.js running this script. The source build needs cmake, a C
// compiler, make, pkg-config and libhiredis-dev; each one missing is named
// with the Debian package to install. Downloads nothing.
//
//   npm install --build-from-source   # skip the prebuilt binary
//   REDTURN_BUILD_FROM_SOURCE=1       # the same
//
// scripts/bundle.js requires this file to build the prebuilt binary.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { pkg, napiVersion, prebuiltPath, isGlibc } = require('../lib/prebuilt');

const log = (msg) => console.error(`redturn: ${msg}`);

function sourceRoot() {
  const bundled = path.join(pkg, 'deps', 'redturn');
  if (fs.existsSync(path.join(bundled, 'include', 'redturn.h'))) return bundled;
  return path.join(pkg, '..', '..');
}

function nodeHeaders() {
  const own = path.resolve(path.dirname(process.execPath), '..', 'include', 'node');
  return [own, '/usr/local/include/node', '/usr/include/node']
    .find((d) => fs.existsSync(path.join(d, 'node_api.h'))) || null;
}

function which(cmd) {
  if (cmd.includes('/')) return fs.existsSync(cmd) ? cmd : null;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const file = path.join(dir || '.', cmd);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch { /* not here */ }
  }
  return null;
}

/** What the source build lacks: [{ what, debian }], empty when nothing. */
function missing() {
  const out = [];
  if (!which('cmake')) out.push({ what: 'cmake', debian: 'cmake' });
  const cc = process.env.CC ? process.env.CC.split(' ')[0] : null;
  if (cc ? !which(cc) : !['cc', 'gcc', 'clang'].some(which)) {
    out.push({ what: `a C compiler (${cc || 'cc, gcc or clang'})`, debian: 'gcc' });
  }
  if (!process.env.CMAKE_GENERATOR && !which('make')) out.push({ what: 'make', debian: 'make' });
  if (!which('pkg-config')) {
    out.push({ what: 'pkg-config', debian: 'pkg-config' });
    out.push({ what: 'hiredis (unchecked without pkg-config)', debian: 'libhiredis-dev' });
  } else if (spawnSync('pkg-config', ['--exists', 'hiredis']).status !== 0) {
    out.push({ what: 'hiredis (pkg-config finds no hiredis.pc)', debian: 'libhiredis-dev' });
  }
  if (!nodeHeaders()) {
    out.push({ what: 'the Node.js headers (node_api.h)', debian: 'libnode-dev' });
  }
  return out;
}

function run(cmd, argv) {
  const r = spawnSync(cmd, argv, { stdio: ['ignore', process.stderr, process.stderr] });
  if (r.error) throw new Error(`cannot run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${argv[0]} failed (exit ${r.status}), output above`);
}

/** Build redturn.node from source into dir (CMake's build tree); its path. */
function sourceBuild(dir, extra = []) {
  const lack = missing();
  if (lack.length > 0) {
    const err = new Error('cannot build redturn.node from source, missing:\n' +
      lack.map((m) => `  ${m.what}: Debian package ${m.debian}`).join('\n') +
      `\n  (apt-get install ${[...new Set(lack.map((m) => m.debian))].join(' ')}` +
      ', then run `npm rebuild redturn`)');
    err.missing = lack;
    throw err;
  }
  const args = ['-S', pkg, '-B', dir, '-DCMAKE_BUILD_TYPE=Release',
    `-DREDTURN_NODE_ROOT=${sourceRoot()}`, `-DREDTURN_NODE_INCLUDE_DIR=${nodeHeaders()}`, ...extra];
  run('cmake', args);
  run('cmake', ['--build', dir, '--parallel', process.env.REDTURN_BUILD_JOBS || '2']);
  const file = path.join(dir, 'redturn.node');
  if (!fs.existsSync(file)) throw new Error(`the build made no ${file}`);
  return file;
}

/** Whether file loads in this Node.js: { ok, why }. Every symbol is bound
 * at load (LD_BIND_NOW), so one the node binary lacks shows here. */
function testLoad(file) {
  const r = spawnSync(process.execPath, ['-e',
    `const m = require(${JSON.stringify(file)});` +
    'if (typeof m.open !== "function") throw new Error("not redturn.node: no open()");'], {
    env: Object.assign({}, process.env, { LD_BIND_NOW: '1' }),
    encoding: 'utf8',
    timeout: 30000,
  });
  if (r.status === 0) return { ok: true };
  const text = (r.stderr || '').split('\n').find((l) => /Error/.test(l)) ||
    (r.error ? r.error.message : `exit ${r.status}`);
  return { ok: false, why: text.trim() };
}

/** Why the prebuilt binary cannot be used here, or null when it can. */
function prebuiltUnusable() {
  const file = prebuiltPath();
  if (!fs.existsSync(file)) return `no prebuilt binary for ${process.platform}-${process.arch}`;
  if (!isGlibc()) return 'the prebuilt binary needs glibc';
  if (Number(process.versions.napi) < napiVersion) {
    return `the prebuilt binary needs Node-API ${napiVersion}, this Node.js has ${process.versions.napi}`;
  }
  const t = testLoad(file);
  return t.ok ? null : `the prebuilt binary does not load: ${t.why}`;
}

function main() {
  const fromSource = process.env.npm_config_build_from_source === 'true' ||
    process.env.REDTURN_BUILD_FROM_SOURCE === '1';
  if (!fromSource) {
    const why = prebuiltUnusable();
    if (why === null) {
      log(`using the prebuilt ${path.relative(pkg, prebuiltPath())}`);
      return 0;
    }
    log(`${why}; building from source`);
  } else {
    log('building from source (asked for)');
  }
  try {
    const file = sourceBuild(path.join(pkg, 'build'));
    const t = testLoad(file);
    if (!t.ok) throw new Error(`the built ${file} does not load: ${t.why}`);
    log(`built ${path.relative(pkg, file)}`);
    return 0;
  } catch (err) {
    log(err.message);
    return 1;
  }
}

if (require.main === module) process.exitCode = main();

module.exports = { missing, sourceBuild, testLoad };
