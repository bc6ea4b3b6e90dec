'use strict';
// npm install: build redturn.node with CMake from the bundled sources
// (deps/redturn/, or this checkout's when run inside the repository),
// against the headers of the Node.js running this script. Needs cmake, a C
// compiler, pkg-config and the -dev packages of hiredis, uuid and OpenSSL;
// downloads nothing.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.join(__dirname, '..');
const build = path.join(pkg, 'build');
let root = path.join(pkg, 'deps', 'redturn');
if (!fs.existsSync(path.join(root, 'include', 'redturn.h'))) {
  root = path.join(pkg, '..', '..');
}
const args = ['-S', pkg, '-B', build, '-DCMAKE_BUILD_TYPE=Release',
  `-DREDTURN_NODE_ROOT=${root}`];
const headers = path.join(path.dirname(process.execPath), '..', 'include', 'node');
if (fs.existsSync(path.join(headers, 'node_api.h'))) {
  args.push(`-DREDTURN_NODE_INCLUDE_DIR=${path.resolve(headers)}`);
}

function run(cmd, argv) {
  const r = spawnSync(cmd, argv, { stdio: 'inherit' });
  if (r.error) {
    console.error(`redturn: cannot run ${cmd}: ${r.error.message} (install cmake and a C compiler)`);
    process.exit(1);
  }
  if (r.status !== 0) process.exit(r.status || 1);
}

run('cmake', args);
run('cmake', ['--build', build, '--parallel', process.env.REDTURN_BUILD_JOBS || '2']);
if (!fs.existsSync(path.join(build, 'redturn.node'))) {
  console.error('redturn: the build made no build/redturn.node');
  process.exit(1);
}
