'use strict';
// prepack: copy the library's sources into deps/redturn/ so the tarball
// builds on its own (scripts/build.js): include/, src/*.c and *.h, lua/,
// cmake/embed_lua.cmake, and the license. Run from a checkout of redturn.
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.join(__dirname, '..');
const root = path.join(pkg, '..', '..');
const dest = path.join(pkg, 'deps', 'redturn');

if (!fs.existsSync(path.join(root, 'include', 'redturn.h'))) {
  console.error(`bundle.js: no redturn checkout at ${root}`);
  process.exit(1);
}
fs.rmSync(dest, { recursive: true, force: true });
fs.mkdirSync(path.join(dest, 'src'), { recursive: true });
fs.mkdirSync(path.join(dest, 'cmake'), { recursive: true });
fs.cpSync(path.join(root, 'include'), path.join(dest, 'include'), { recursive: true });
fs.cpSync(path.join(root, 'lua'), path.join(dest, 'lua'), { recursive: true });
for (const f of fs.readdirSync(path.join(root, 'src'))) {
  if (/\.[ch]$/.test(f)) fs.copyFileSync(path.join(root, 'src', f), path.join(dest, 'src', f));
}
fs.copyFileSync(path.join(root, 'cmake', 'embed_lua.cmake'), path.join(dest, 'cmake', 'embed_lua.cmake'));
for (const f of ['LICENSE', 'COPYING']) {
  if (fs.existsSync(path.join(root, f))) fs.copyFileSync(path.join(root, f), path.join(pkg, f));
}
console.log(`bundle.js: redturn sources copied to ${path.relative(pkg, dest)}`);
