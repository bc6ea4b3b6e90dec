'use strict';
// rediss:// against a redis-server serving TLS, with certificates made here
// by the openssl command (as tests/support/rtt_tls.c does for the C tests).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { redturn, startRedis, uniq, freePort } = require('./helpers');

const MAKE_CERTS = [
  'set -e',
  'key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key 2>/dev/null; }',
  'ca() { key $1; openssl req -x509 -new -key $1.key -days 2 -subj /CN=$1 -out $1.crt; }',
  'cert() { key $1; openssl req -new -key $1.key -subj /CN=$1 -out $1.csr; printf "%s\\n" "$3" > $1.ext; ' +
    'openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2 -extfile $1.ext -out $1.crt 2>/dev/null; }',
  'ca ca; ca other-ca',
  "cert server ca 'subjectAltName=IP:127.0.0.1,DNS:localhost'",
].join('\n');

let dir;
let srv;
let tlsPort;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redturn-node-tls.'));
  execFileSync('sh', ['-c', MAKE_CERTS], { cwd: dir, stdio: 'ignore' });
  tlsPort = await freePort();
  srv = await startRedis(['--tls-port', String(tlsPort),
    '--tls-cert-file', path.join(dir, 'server.crt'),
    '--tls-key-file', path.join(dir, 'server.key'),
    '--tls-ca-cert-file', path.join(dir, 'ca.crt'),
    '--tls-auth-clients', 'no']);
});

after(async () => {
  if (srv) await srv.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('rediss:// with the CA: lock, hand off, release over TLS', async () => {
  const url = `rediss://127.0.0.1:${tlsPort}`;
  const c = await redturn.connect(url, { tls: { ca: path.join(dir, 'ca.crt') } });
  try {
    const name = uniq('tls');
    const a = await c.wait(name);
    const pb = c.wait(name);
    await a.release();
    const b = await pb;
    assert.ok(b.fence > a.fence);
    await b.release();
  } finally {
    await c.close();
  }
});

test('rediss:// with a CA that did not sign the server certificate: RT_ETLSVERIFY with OpenSSL\'s reason', async () => {
  await assert.rejects(
    redturn.connect(`rediss://127.0.0.1:${tlsPort}`, { tls: { ca: path.join(dir, 'other-ca.crt') } }),
    (e) => {
      assert.equal(e.code, 'RT_ETLSVERIFY');
      assert.match(e.message, /certificate/i);
      return true;
    });
});
