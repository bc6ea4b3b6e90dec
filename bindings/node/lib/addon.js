'use strict';
// Loads redturn.node, the first of these that exists and loads:
//  - REDTURN_NODE_ADDON, if set;
//  - build/redturn.node, built from source by the install script
//    (scripts/build.js) when the prebuilt binary did not load;
//  - prebuilds/<platform>-<arch>/redturn.node, built by `npm pack`;
//  - inside a redturn checkout only (this package at bindings/node), the
//    project's CMake build tree, build/bindings/node/redturn.node.
const path = require('node:path');
const fs = require('node:fs');
const { pkg, prebuiltPath } = require('./prebuilt');

const candidates = [
  process.env.REDTURN_NODE_ADDON,
  path.join(pkg, 'build', 'redturn.node'),
  prebuiltPath(),
].filter(Boolean);
const checkout = path.join(pkg, '..', '..');
if (path.basename(path.dirname(pkg)) === 'bindings' &&
    fs.existsSync(path.join(checkout, 'include', 'redturn.h'))) {
  candidates.push(path.join(checkout, 'build', 'bindings', 'node', 'redturn.node'));
}

const failures = [];
let found = null;
for (const file of candidates) {
  if (!fs.existsSync(file)) continue;
  try {
    module.exports = require(file);
    found = file;
    break;
  } catch (err) {
    failures.push(`${file}: ${err.message.split('\n')[0]}`);
  }
}
if (found === null) {
  const where = `${process.platform}-${process.arch}, Node-API ${process.versions.napi}`;
  const why = failures.length > 0 ? `none loads (${failures.join('; ')})`
    : 'no prebuilt binary for this platform and no build';
  const err = new Error(`redturn: redturn.node for ${where}: ${why}. ` +
    'Run `npm rebuild redturn` to build it from source ' +
    '(needs cmake, a C compiler, make, pkg-config and libhiredis-dev).');
  err.code = 'MODULE_NOT_FOUND';
  throw err;
}
module.exports.addonPath = found;
