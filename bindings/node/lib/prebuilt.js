'use strict';
// Where the package keeps the binary `npm pack` built (scripts/bundle.js):
// prebuilds/<platform>-<arch>/redturn.node. Only linux-x64 (glibc) has one;
// lib/addon.js loads it, scripts/build.js checks it loads at install.
const path = require('node:path');

const pkg = path.join(__dirname, '..');
// The Node-API version the addon is compiled for (CMakeLists.txt, NAPI_VERSION).
const napiVersion = 8;

function prebuiltPath(platform = process.platform, arch = process.arch) {
  return path.join(pkg, 'prebuilds', `${platform}-${arch}`, 'redturn.node');
}

/** true when this process runs on glibc (not musl), as the prebuilt needs. */
function isGlibc() {
  if (process.platform !== 'linux') return false;
  // The report's network part can take seconds (reverse lookups): not needed.
  if (process.report && 'excludeNetwork' in process.report) process.report.excludeNetwork = true;
  const report = process.report && process.report.getReport();
  return Boolean(report && report.header && report.header.glibcVersionRuntime);
}

module.exports = { pkg, napiVersion, prebuiltPath, isGlibc };
