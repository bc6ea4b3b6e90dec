'use strict';
// prepack: make the package self-contained. Copies the library's sources
// into deps/redturn/ (include/, src/*.c and *.h, lua/, protocol/,
// cmake/embed_lua.cmake and cmake/protocol.cmake) and the project's license, then builds redturn.node
// from them (scripts/build.js) into prebuilds/<platform>-<arch>/, the binary
// the install uses when it loads; only on linux-x64 with glibc, the one
// platform the package carries a binary for. Run from a checkout of redturn.
//
// postpack (--clean): removes what prepack made.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pkg, prebuiltPath, isGlibc } = require('../lib/prebuilt');

const root = path.join(pkg, '..', '..');
const dest = path.join(pkg, 'deps', 'redturn');
const licenses = ['LICENSE', 'COPYING'];

function clean() {
  fs.rmSync(path.join(pkg, 'deps'), { recursive: true, force: true });
  fs.rmSync(path.join(pkg, 'prebuilds'), { recursive: true, force: true });
  for (const f of licenses) {
    if (fs.existsSync(path.join(root, f))) fs.rmSync(path.join(pkg, f), { force: true });
  }
}

function bundle() {
  if (!fs.existsSync(path.join(root, 'include', 'redturn.h'))) {
    throw new Error(`no redturn checkout at ${root}`);
  }
  fs.mkdirSync(path.join(dest, 'src'), { recursive: true });
  fs.mkdirSync(path.join(dest, 'cmake'), { recursive: true });
  fs.cpSync(path.join(root, 'include'), path.join(dest, 'include'), { recursive: true });
  fs.cpSync(path.join(root, 'lua'), path.join(dest, 'lua'), { recursive: true });
  for (const f of fs.readdirSync(path.join(root, 'src'))) {
    if (/\.[ch]$/.test(f)) fs.copyFileSync(path.join(root, 'src', f), path.join(dest, 'src', f));
  }
  fs.copyFileSync(path.join(root, 'cmake', 'embed_lua.cmake'), path.join(dest, 'cmake', 'embed_lua.cmake'));
  fs.copyFileSync(path.join(root, 'cmake', 'protocol.cmake'), path.join(dest, 'cmake', 'protocol.cmake'));
  fs.cpSync(path.join(root, 'protocol'), path.join(dest, 'protocol'), { recursive: true });
  for (const f of licenses) {
    if (fs.existsSync(path.join(root, f))) fs.copyFileSync(path.join(root, f), path.join(pkg, f));
  }
  console.error(`bundle.js: redturn sources copied to ${path.relative(pkg, dest)}`);
}

function prebuild() {
  if (process.platform !== 'linux' || process.arch !== 'x64' || !isGlibc()) {
    console.error(`bundle.js: no prebuilt binary on ${process.platform}-${process.arch} (only linux-x64, glibc)`);
    return;
  }
  const { sourceBuild, testLoad } = require('./build');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'redturn-prebuild.'));
  try {
    const built = sourceBuild(tmp, ['-DREDTURN_NODE_STRIP=ON', '-DCMAKE_C_FLAGS=-Werror']);
    const t = testLoad(built);
    if (!t.ok) throw new Error(`the prebuilt binary does not load: ${t.why}`);
    fs.mkdirSync(path.dirname(prebuiltPath()), { recursive: true });
    fs.copyFileSync(built, prebuiltPath());
    console.error(`bundle.js: built ${path.relative(pkg, prebuiltPath())}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

try {
  clean();
  if (process.argv[2] !== '--clean') {
    bundle();
    prebuild();
  }
} catch (err) {
  console.error(`bundle.js: ${err.message}`);
  process.exitCode = 1;
}
