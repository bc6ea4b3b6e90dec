'use strict';
// Finds redturn.node: REDTURN_NODE_ADDON if set, then the package's own
// build (scripts/build.js, run at install), then the project's CMake build
// tree (build/bindings/node) for work inside the repository.
const path = require('node:path');
const fs = require('node:fs');

const candidates = [
  process.env.REDTURN_NODE_ADDON,
  path.join(__dirname, '..', 'build', 'redturn.node'),
  path.join(__dirname, '..', '..', '..', 'build', 'bindings', 'node', 'redturn.node'),
].filter(Boolean);

const found = candidates.find((p) => fs.existsSync(p));
if (!found) {
  const err = new Error('redturn.node not found (looked in: ' + candidates.join(', ') +
    '): build it with `npm install` (scripts/build.js) or the project\'s CMake build');
  err.code = 'MODULE_NOT_FOUND';
  throw err;
}
module.exports = require(found);
module.exports.addonPath = found;
