'use strict';
// The two URL forms besides redis:// and rediss:// (tls.test.js), against
// real servers started here on 127.0.0.1: redis-sentinel:// (a master, a
// replica and two Sentinels, then SENTINEL FAILOVER) and redis:// to a
// Redis Cluster of three masters (locks on every shard, hand-offs, a
// semaphore, inspect).
const { test, before, after, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { spawn, execFile } = require('node:child_process');
const { redturn, uniq, sleep } = require('./helpers');

// ---- servers ---------------------------------------------------------------

const servers = []; // every redis-server started here: { proc, exited }
const dirs = [];

after(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => {
    if (s.exited) return resolve();
    const kill = setTimeout(() => s.proc.kill('SIGKILL'), 3000);
    s.proc.once('exit', () => { clearTimeout(kill); resolve(); });
    s.proc.kill('SIGTERM');
  })));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmpDir(tag) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `redturn-node-${tag}.`));
  dirs.push(d);
  return d;
}

function canListen(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

// A port below 55000 whose cluster bus port (port + 10000) is free too: the
// kernel's ephemeral range reaches 60999, too high for a bus port.
async function pickPort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 35000);
    if (await canListen(port) && await canListen(port + 10000)) return port;
  }
}

/** redis-cli -p port args...: its output, trimmed (errors come back as text). */
function cli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 10000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`redis-cli -p ${port} ${args.join(' ')}: ${err.message} ${stderr}`));
        else resolve(stdout.trim());
      });
  });
}

async function until(what, ms, fn) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(100);
  }
}

/** A redis-server (args(port) after the binary) answering PING; its port. */
async function startServer(args) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await pickPort();
    const s = { proc: spawn('redis-server', args(port), { stdio: 'ignore' }), exited: false };
    s.proc.on('exit', () => { s.exited = true; });
    servers.push(s);
    const end = Date.now() + 10000;
    while (!s.exited && Date.now() < end) {
      if (await cli(port, 'PING').catch(() => '') === 'PONG') return port;
      await sleep(100);
    }
    if (!s.exited) s.proc.kill('SIGKILL');
  }
  throw new Error('could not start redis-server');
}

function redisArgs(dir, extra) {
  return (port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--dir', dir, ...extra];
}

/** A holder, then two waiters (the queue's length counts the holder) on two clients, granted in their queue order. */
async function handOffInOrder(c1, c2, name) {
  const order = [];
  const a = await c1.wait(name, { timeout: 10000 });
  const pb = c2.wait(name, { timeout: 15000 }).then((l) => { order.push('b'); return l; });
  await until('b queued', 10000, async () => (await c1.inspect(name)).queueLength === 2);
  const pc = c1.wait(name, { timeout: 15000 }).then((l) => { order.push('c'); return l; });
  await until('c queued', 10000, async () => (await c1.inspect(name)).queueLength === 3);
  await sleep(50);
  assert.deepEqual(order, []);
  await a.release();
  const b = await pb;
  await sleep(100);
  assert.deepEqual(order, ['b']);
  await b.release();
  const c = await pc;
  assert.deepEqual(order, ['b', 'c']);
  assert.ok(b.fence > a.fence && c.fence > b.fence, `fences ${a.fence} ${b.fence} ${c.fence}`);
  await c.release();
  return [a.fence, b.fence, c.fence];
}

// ---- Sentinel --------------------------------------------------------------

describe('redis-sentinel://', () => {
  let master;
  let replica;
  const sentinels = [];
  let url;

  before(async () => {
    const dir = tmpDir('sentinel');
    master = await startServer(redisArgs(fs.mkdtempSync(path.join(dir, 'm.')), []));
    replica = await startServer(redisArgs(fs.mkdtempSync(path.join(dir, 'r.')),
      ['--replicaof', '127.0.0.1', String(master)]));
    await until('replica online', 15000,
      async () => /slave0:.*state=online/.test(await cli(master, 'INFO', 'replication')));
    for (let i = 0; i < 2; i++) {
      const sdir = fs.mkdtempSync(path.join(dir, `s${i}.`));
      const conf = path.join(sdir, 'sentinel.conf');
      sentinels.push(await startServer((port) => {
        fs.writeFileSync(conf, [
          `port ${port}`, 'bind 127.0.0.1', `dir ${sdir}`,
          `sentinel monitor mymaster 127.0.0.1 ${master} 1`,
          'sentinel down-after-milliseconds mymaster 1000',
          'sentinel failover-timeout mymaster 5000', ''].join('\n'));
        return [conf, '--sentinel'];
      }));
    }
    url = `redis-sentinel://${sentinels.map((p) => `127.0.0.1:${p}`).join(',')}#mymaster`;
  });

  test('a lock, a FIFO hand-off, then SENTINEL FAILOVER: the queue moves to the new master with higher fences',
    { timeout: 30000 }, async (t) => {
      const c1 = await redturn.connect(url, { label: 'sentinel-1' });
      const c2 = await redturn.connect(url, { label: 'sentinel-2' });
      try {
        const name = uniq('sentinel');
        const fences = await handOffInOrder(c1, c2, name);

        // A holder and a waiter across the failover, written to the replica.
        const h = await c1.wait(name, { timeout: 10000 });
        assert.ok(h.fence > fences[2]);
        let granted = null;
        const pw = c2.wait(name, { timeout: 25000 }).then((l) => { granted = l; return l; });
        await until('waiter queued', 10000, async () => (await c1.inspect(name)).queueLength === 2);
        // The replica must have the holder and the waiter before it is
        // promoted (else the new master grants the waiter at once: the
        // one-lease bound of wait_replicas 0). WAIT counts only its own
        // connection's writes, none for a new one, so compare offsets.
        const offset = async (port, field) =>
          Number(new RegExp(`${field}:(\\d+)`).exec(await cli(port, 'INFO', 'replication'))[1]);
        const written = await offset(master, 'master_repl_offset');
        await until('the replica has the queue', 10000,
          async () => await offset(replica, 'slave_repl_offset') >= written);

        // The Sentinels may not know the replica yet (NOGOODSLAVE): ask again.
        await until('SENTINEL FAILOVER accepted', 15000,
          async () => await cli(sentinels[0], 'SENTINEL', 'FAILOVER', 'mymaster') === 'OK');
        const t0 = Date.now();
        await until('both Sentinels name the replica', 15000, async () => {
          const answers = await Promise.all(sentinels.map((s) =>
            cli(s, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'mymaster')));
          return answers.every((a) => a.split('\n')[1] === String(replica));
        });
        assert.equal(granted, null, `the waiter was granted (fence ${granted && granted.fence}) while the holder held (lost: ${h.lost})`);
        // The release goes to the new master once the client followed the
        // switch; the waiter is granted there (not by the holder's 30 s
        // lease running out, which the bound below would not allow).
        await h.release();
        const w = await pw;
        const grantMs = Date.now() - t0;
        assert.ok(w.fence > h.fence, `fence ${w.fence} after ${h.fence}`);
        assert.ok(grantMs < 15000, `granted ${grantMs} ms after the failover`);

        // A new wait on the first client, and the grant is on the new master.
        await w.release();
        const n = await c1.wait(name, { timeout: 15000 });
        assert.ok(n.fence > w.fence, `fence ${n.fence} after ${w.fence}`);
        const direct = await redturn.connect(`redis://127.0.0.1:${replica}`);
        try {
          const info = await direct.inspect(name);
          assert.equal(info.locked, true);
          assert.equal(info.holder, n.id);
          assert.equal(info.holderLabel, 'sentinel-1');
          assert.equal(info.fence, n.fence);
        } finally {
          await direct.close();
        }
        await n.release();
        t.diagnostic(`SENTINEL FAILOVER to the waiter's grant: ${grantMs} ms`);
      } finally {
        await c1.close();
        await c2.close();
      }
    });
});

// ---- Cluster ---------------------------------------------------------------

describe('redis:// to a Redis Cluster', () => {
  const nodes = [];
  let url;

  before(async () => {
    const dir = tmpDir('cluster');
    for (let i = 0; i < 3; i++) {
      const ndir = fs.mkdtempSync(path.join(dir, `n${i}.`));
      nodes.push(await startServer((port) => redisArgs(ndir, ['--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(ndir, `nodes-${port}.conf`)])(port)));
    }
    await cli(nodes[0], '--cluster', 'create', ...nodes.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas', '0', '--cluster-yes');
    for (const p of nodes) {
      await until(`cluster_state:ok on ${p}`, 20000,
        async () => /cluster_state:ok/.test(await cli(p, 'CLUSTER', 'INFO')));
    }
    url = `redis://127.0.0.1:${nodes[0]}`;
  });

  test('locks on 30 names are held on every shard, and all released', { timeout: 30000 }, async () => {
    const c = await redturn.connect(url, { label: 'cluster-1' });
    try {
      const names = Array.from({ length: 30 }, (_, i) => uniq(`shard${i}`));
      const locks = await Promise.all(names.map((n) => c.wait(n, { timeout: 15000 })));
      for (const l of locks) assert.ok(l.fence > 0n);
      // Each of the three masters holds some of the keys (the chance that
      // 30 names miss a shard is about 1 in 60 000).
      const sizes = await Promise.all(nodes.map((p) => cli(p, 'DBSIZE')));
      for (const s of sizes) assert.ok(Number(s) > 0, `keys per node: ${sizes}`);
      for (const [i, n] of names.entries()) {
        const info = await c.inspect(n);
        assert.equal(info.locked, true);
        assert.equal(info.holder, locks[i].id);
      }
      await Promise.all(locks.map((l) => l.release()));
      for (const n of names) assert.equal(await c.isLocked(n), false);
    } finally {
      await c.close();
    }
  });

  test('two clients, seeded at different nodes, hand off in FIFO order on four names', { timeout: 30000 }, async () => {
    const c1 = await redturn.connect(url, { label: 'cluster-1' });
    const c2 = await redturn.connect(`redis://127.0.0.1:${nodes[2]}`, { label: 'cluster-2' });
    try {
      for (let i = 0; i < 4; i++) await handOffInOrder(c1, c2, uniq(`fifo${i}`));
    } finally {
      await c1.close();
      await c2.close();
    }
  });

  test('a semaphore and an election on the cluster, seen by inspect', { timeout: 30000 }, async () => {
    const c1 = await redturn.connect(url, { label: 'cluster-1' });
    const c2 = await redturn.connect(url, { label: 'cluster-2' });
    try {
      const sem = uniq('sem');
      const a = await c1.semaphore(sem, { of: 2 });
      const b = await c2.semaphore(sem, { of: 2 });
      let third = null;
      const pc = c2.semaphore(sem, { of: 2, timeout: 15000 }).then((l) => { third = l; return l; });
      await until('third queued', 10000, async () => (await c1.inspect(sem)).waiterPermits.length === 1);
      const info = await c1.inspect(sem);
      assert.equal(info.kind, 'semaphore');
      assert.equal(info.permitsUsed, 2);
      assert.equal(info.holders.length, 2);
      assert.equal(third, null);
      await a.release();
      const c = await pc;
      assert.ok(c.fence > b.fence);
      await b.release();
      await c.release();

      const el = uniq('election');
      const leader = await c1.campaign(el, 'node-1');
      let second = null;
      const pf = c2.campaign(el, 'node-2', { timeout: 15000 }).then((l) => { second = l; return l; });
      await until('candidate queued', 10000, async () => (await c2.inspect(el)).queueLength === 2);
      const e = await c2.inspect(el);
      assert.equal(e.holder, leader.id);
      assert.equal(e.holderLabel, 'node-1'); // an election keeps the leader's value as its label
      assert.equal(second, null);
      await leader.resign();
      const follower = await pf;
      assert.ok(follower.fence > leader.fence);
      assert.equal((await c1.inspect(el)).holder, follower.id);
      await follower.resign();
    } finally {
      await c1.close();
      await c2.close();
    }
  });
});
