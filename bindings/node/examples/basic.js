// A fair lock from Node.js: two workers take turns on one resource, in the
// order they asked. Run: REDIS_URL=redis://127.0.0.1:6379 node basic.js
const redturn = require('redturn');

async function main() {
  const client = await redturn.connect(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  try {
    // Wait (FIFO) at most 5 s; the lease is 10 s unless released first.
    const lock = await client.wait('report:daily', { ttl: 10000, timeout: 5000 });
    lock.on('lost', (err) => console.error('lost the lock:', err.code));
    console.log(`holding report:daily with fence ${lock.fence}`);
    await lock.release();

    // Scoped: acquire, run, release (also if the body throws), lease renewed meanwhile.
    const turns = [];
    await Promise.all(['a', 'b'].map((who) =>
      client.withLock('report:daily', async (l) => {
        turns.push(`${who}:${l.fence}`);
      })));
    console.log('turns:', turns.join(' '));

    // tryLock resolves null instead of waiting when someone holds it.
    const held = await client.tryLock('report:daily');
    console.log('free now:', held !== null);
    if (held) await held.release();
  } catch (err) {
    console.error(err.code, err.message); // e.g. RT_EWAITTIMEOUT
    process.exitCode = 1;
  } finally {
    await client.close(); // nothing keeps the process alive after this
  }
}

main();
