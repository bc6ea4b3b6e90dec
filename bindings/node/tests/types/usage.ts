// Typed use of the package, checked with tsc --strict by types.test.js:
// index.d.ts must describe what lib/index.js does.
import * as redturn from '../../index';
import { RedturnError, Lock, Client } from '../../index';

async function main(url: string): Promise<void> {
  const client: Client = await redturn.connect(url, { ttl: 5000, label: 'typed' });
  const off: () => void = client.closeOnSignals({ timeout: 2000 });
  const ac = new AbortController();
  const lock: Lock = await client.wait('typed', { timeout: 0, signal: ac.signal, autoRenew: true });
  lock.on('lost', (err: RedturnError) => { const c: string = err.code; void c; });
  const s: AbortSignal = lock.signal;
  const id: string | null = lock.id;
  const fence: bigint = lock.fence;
  void s; void id; void fence;
  await lock.release();
  const t: Lock | null = await client.tryLock('typed', { ttl: 100 });
  if (t) await t.release();
  const n: number = await client.withLock('typed', async (l: Lock, signal: AbortSignal) => {
    if (signal.aborted || l.lost) return 0;
    return 1;
  });
  void n;
  const sem = await client.semaphore('typed-sem', { of: 3, permits: 1 });
  await sem.release();
  const all = await client.waitAll(['a', 'b'], { timeout: new Date(Date.now() + 1000) });
  const fences: bigint[] = all.fences;
  void fences;
  await all.release();
  for await (const leader of client.observe('typed-el', { signal: ac.signal })) {
    if (leader) { const v: string = leader.value; void v; }
    break;
  }
  const st = client.stats();
  const p: number = st.acquire.p99Us;
  void p;
  try {
    await client.wait('', {});
  } catch (e) {
    if (e instanceof RedturnError && e.code === 'RT_ENAMEEMPTY') { const no: number = e.errno; void no; }
  }
  off();
  await client.close({ timeout: 1000 });
}

void main;
