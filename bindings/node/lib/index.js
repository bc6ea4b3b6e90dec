'use strict';
// redturn for Node.js: fair FIFO locks through Redis, run by the redturn C
// client on Node's own event loop (lib/addon.js finds redturn.node).

const { EventEmitter } = require('node:events');
const { AsyncResource } = require('node:async_hooks');
const native = require('./addon');

const KINDS = {
  mutex: 0,
  semaphore: 1,
  shared: 2,
  exclusive: 3,
  election: 4,
};

const E = native.errors;

/** An Error whose code is the library's name (RT_EWAITTIMEOUT, ...). */
class RedturnError extends Error {
  constructor(code, message, errno) {
    super(message);
    this.name = 'RedturnError';
    this.code = code;
    this.errno = errno;
  }
}

function makeError(status, code, message) {
  return new RedturnError(code || native.errName(status),
    message || native.strerror(status), status);
}

// An error thrown by the addon (an Error or TypeError with a code): the
// same as a RedturnError.
function asRedturn(err) {
  if (err instanceof RedturnError || !err || typeof err.code !== 'string' || E[err.code] === undefined) {
    return err;
  }
  return new RedturnError(err.code, err.message, E[err.code]);
}

// A status returned by a native call (0 or RT_E*): throw it as an error.
function check(status) {
  if (status !== 0) throw makeError(status);
}

// One 'abort' listener per AbortSignal, however many waits share it (no
// MaxListenersExceededWarning): signal -> the Set of the waits' callbacks.
const abortWaits = new WeakMap();

/** Call fn once signal aborts; returns the function that stops that. */
function onAbortOf(signal, fn) {
  let fns = abortWaits.get(signal);
  if (!fns) {
    const all = new Set();
    fns = all;
    all.listener = () => {
      abortWaits.delete(signal);
      for (const f of all) f();
    };
    abortWaits.set(signal, all);
    signal.addEventListener('abort', all.listener, { once: true });
  }
  fns.add(fn);
  return () => {
    if (!fns.delete(fn) || fns.size > 0 || abortWaits.get(signal) !== fns) return;
    abortWaits.delete(signal);
    signal.removeEventListener('abort', fns.listener);
  };
}

function abortError(signal) {
  const err = makeError(E.RT_ECANCELED, 'RT_ECANCELED',
    'operation canceled: the AbortSignal was aborted');
  err.name = 'AbortError';
  if (signal && signal.reason !== undefined) err.cause = signal.reason;
  return err;
}

function ms(value, name, dflt) {
  if (value === undefined || value === null) return dflt;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new RedturnError('RT_EINVAL', `${name} must be a number of milliseconds`, E.RT_EINVAL);
  }
  return Math.floor(value);
}

// A lease: at least 1 ms (RT_ETTL otherwise), or dflt when not given.
function ttlOf(value, dflt) {
  if (value === undefined || value === null) return dflt;
  const t = ms(value, 'ttl');
  if (t < 1) {
    throw new RedturnError('RT_ETTL', `ttl must be at least 1 ms (got ${value})`, E.RT_ETTL);
  }
  return t;
}

// timeout: ms from now (number), the Date to give up at, or none: undefined
// (wait forever; the native side's RT_FOREVER).
function timeoutOf(opts) {
  if (opts.deadline !== undefined) {
    throw new RedturnError('RT_EINVAL',
      'deadline is not a wait option: the wait bound is timeout (ms or a Date)', E.RT_EINVAL);
  }
  let d = opts.timeout;
  if (d === undefined || d === null || d === Infinity) return undefined;
  if (d instanceof Date) d = d.getTime() - Date.now();
  d = ms(d, 'timeout');
  return d < 0 ? 0 : d; // 0: try once (wait() rejects RT_EWAITTIMEOUT if taken)
}

// autoRenew's every: true/undefined (undefined: the native side's
// RT_RENEW_DEFAULT, a third of the TTL), false (native.renewOff), or a
// period of at least 1 ms.
function renewPeriod(every) {
  if (every === undefined || every === true) return undefined;
  if (every === false) return native.renewOff;
  const e = ms(every, 'autoRenew');
  if (e < 1) {
    throw new RedturnError('RT_EINVAL',
      `autoRenew must be true, false or a period of at least 1 ms (got ${every})`, E.RT_EINVAL);
  }
  return e;
}

function requestOf(opts, kind) {
  const k = kind !== undefined ? kind : (opts.kind === undefined ? 'mutex' : opts.kind);
  const n = typeof k === 'number' ? k : KINDS[k];
  if (n === undefined) {
    throw new RedturnError('RT_EINVAL', `unknown lock kind: ${k}`, E.RT_EINVAL);
  }
  return { kind: n, permits: opts.permits, of: opts.of, value: opts.value };
}

function nativeOptions(url, options) {
  const o = {};
  if (url) o.url = url;
  const copy = ['host', 'port', 'db', 'username', 'password', 'prefix', 'label',
    'sentinelUsername', 'sentinelPassword', 'waitReplicas', 'allowEviction',
    'retryFirstConnect'];
  for (const k of copy) if (options[k] !== undefined) o[k] = options[k];
  if (options.ttl !== undefined) o.ttl = ttlOf(options.ttl, undefined);
  if (options.connectTimeout !== undefined) o.connectTimeout = ms(options.connectTimeout, 'connectTimeout');
  if (options.commandTimeout !== undefined) o.commandTimeout = ms(options.commandTimeout, 'commandTimeout');
  if (options.waitReplicasTimeout !== undefined) o.waitReplicasTimeout = ms(options.waitReplicasTimeout, 'waitReplicasTimeout');
  const tls = options.tls;
  if (tls) {
    if (!(url && /^rediss(-sentinel)?:/.test(url))) o.tls = true;
    if (typeof tls === 'object') {
      if (tls.ca) o.tlsCaFile = tls.ca;
      if (tls.caDir) o.tlsCaDir = tls.caDir;
      if (tls.cert) o.tlsCertFile = tls.cert;
      if (tls.key) o.tlsKeyFile = tls.key;
      if (tls.servername) o.tlsServerName = tls.servername;
      if (tls.rejectUnauthorized === false) o.tlsInsecure = true;
    }
  }
  return o;
}

/**
 * Connect to Redis. url: redis://, rediss://, redis-sentinel://,
 * rediss-sentinel://, or several seeds (a Cluster). Resolves once both
 * connections are up.
 */
function connect(url, options) {
  if (url !== null && typeof url === 'object') {
    options = url;
    url = options.url;
  }
  options = options || {};
  return new Promise((resolve, reject) => {
    let client;
    let handle;
    try {
      handle = native.open(nativeOptions(url, options), (status, code, message) => {
      if (status === 0) {
        resolve(client);
        return;
      }
      const err = makeError(status, code, message);
      client._closed = true;
      native.close(handle, () => reject(err));
    });
    } catch (err) {
      reject(asRedturn(err));
      return;
    }
    client = new Client(handle);
  });
}

/** A held lock (or semaphore permits, read or write side, leadership). */
class Lock extends EventEmitter {
  constructor(client, name, handle, kind) {
    super();
    this.client = client;
    this.name = name;
    this.kind = kind;
    this._h = handle;
    this._released = false;
    this._lost = false;
    this._fence = 0n;
    this._ac = null;
    // 'lost' runs in the async context of the request that took the lock.
    this._ar = new AsyncResource('RedturnLock');
  }

  /** An AbortSignal that aborts when this lock is lost (lease ended, taken away, or force-released by close). */
  get signal() {
    if (!this._ac) {
      this._ac = new AbortController();
      if (this._lost) this._ac.abort(this._lostError);
    }
    return this._ac.signal;
  }

  /** Fencing token: strictly increases per resource with every grant. */
  get fence() { return this._fence; }

  /** Request id as stored in Redis ("<client id>:<seq>"). */
  get id() { return this._released ? null : this._info('id'); }

  /** Lease end by the Redis clock (ms since the epoch), as of the grant or last extend. */
  get deadline() { return this._released ? null : this._info('deadlineMs'); }

  /** Lease left now by the client's conservative estimate (ms). */
  get leaseLeft() { return this._info('leaseLeftMs') || 0; }

  /** 'held', 'releasing', 'lost' or 'released'. */
  get state() {
    if (this._lost) return 'lost';
    return this._released ? 'released' : (this._info('state') || 'released');
  }

  /** True once the lock was lost (lease ended, taken away). */
  get lost() { return this._lost; }

  _info(key) {
    const i = native.lockInfo(this._h);
    return i ? i[key] : null;
  }

  _onLost(err) {
    if (this._lost) return;
    this._lost = true;
    this._lostError = err;
    this.client._forget(this);
    if (this.listenerCount('lost') > 0 || this._ac) {
      this._ar.runInAsyncScope(() => {
        if (this.listenerCount('lost') > 0) this.emit('lost', err);
        if (this._ac) this._ac.abort(err);
      });
    }
    // Free the handle (and send the release, in case Redis still holds the
    // lease a moment longer): release() now rejects with RT_ELOST.
    if (!this._released) native.signal(this._h, null);
  }

  /** Release the lock and hand it to the next waiter. Rejects with RT_ELOST if it had been lost. */
  release() {
    if (this._released) {
      return Promise.reject(makeError(E.RT_ERELEASED));
    }
    this._released = true;
    if (this._lost) return Promise.reject(makeError(E.RT_ELOST));
    return new Promise((resolve, reject) => {
      const st = native.signal(this._h, (status, code, message) => {
        this.client._forget(this);
        if (status === 0) resolve();
        else reject(makeError(status, code, message));
      });
      if (st !== 0) {
        this.client._forget(this);
        reject(makeError(st));
      }
    });
  }

  /** Push the lease to ttl ms from now (Redis clock). */
  extend(ttl) {
    return new Promise((resolve, reject) => {
      const st = native.extend(this._h, ttlOf(ttl, -1), (status, code, message) => {
        if (status === 0) resolve();
        else reject(makeError(status, code, message));
      });
      if (st !== 0) reject(makeError(st));
    });
  }

  /** Renew the lease automatically every `every` ms (default: a third of the TTL); false stops. */
  autoRenew(every) {
    check(native.autoRenew(this._h, renewPeriod(every)));
    return this;
  }

  /** Ask Redis whether this lock is still held. */
  isOwned() {
    return new Promise((resolve, reject) => {
      const st = native.owned(this._h, (status, code, message, owned) => {
        if (status === 0) resolve(owned);
        else reject(makeError(status, code, message));
      });
      if (st !== 0) reject(makeError(st));
    });
  }

  /** Election: set the leader's value (observers are told). */
  proclaim(value) {
    return new Promise((resolve, reject) => {
      const st = native.proclaim(this._h, String(value), (status, code, message) => {
        if (status === 0) resolve();
        else reject(makeError(status, code, message));
      });
      if (st !== 0) reject(makeError(st));
    });
  }

  /** Election: give up leadership (same as release). */
  resign() { return this.release(); }

  [Symbol.asyncDispose]() {
    return this._released ? Promise.resolve() : this.release();
  }
}

/** Several resources held all-or-nothing (client.waitAll). */
class MultiLock {
  constructor(client, names, handle) {
    this.client = client;
    this.names = names;
    this._h = handle;
    this._released = false;
    this.fences = [];
  }

  _onLost() {
    this.client._forget(this);
  }

  release() {
    if (this._released) return Promise.reject(makeError(E.RT_ERELEASED));
    this._released = true;
    return new Promise((resolve, reject) => {
      const st = native.signalAll(this._h, (status, code, message) => {
        this.client._forget(this);
        if (status === 0) resolve();
        else reject(makeError(status, code, message));
      });
      if (st !== 0) {
        this.client._forget(this);
        reject(makeError(st));
      }
    });
  }

  [Symbol.asyncDispose]() {
    return this._released ? Promise.resolve() : this.release();
  }
}

function leaderOf(l) {
  if (!l || l.id === null) return null;
  return { id: l.id, value: l.value, fence: l.fence, deadline: l.deadlineMs };
}

// A held Lock that became unreachable: release it (which also stops its
// renewal). The native side keeps only a WeakRef of a granted Lock.
const dropped = new FinalizationRegistry(({ client, h }) => {
  client._unhold();
  native.signal(h, null);
});

function closedError() {
  return makeError(E.RT_ECLOSED, 'RT_ECLOSED', 'the client is closed (or closing): no new requests');
}

class Client {
  constructor(handle) {
    this._h = handle;
    this._closed = false;
    this._closing = null;
    // How many Locks and MultiLocks are held now. No list of them: the
    // native side finds them (closeItems), and holds no Lock strongly.
    this._held = 0;
    this._idle = null; // close()'s wait for _held to reach 0
    this._closeLost = null; // the error of the locks close() force-releases
    this._offSignals = null;
  }

  _hold(lock) {
    lock._holding = true;
    this._held++;
    if (lock instanceof Lock) dropped.register(lock, { client: this, h: lock._h }, lock);
  }

  _forget(lock) {
    if (!lock._holding) return;
    lock._holding = false;
    if (lock instanceof Lock) dropped.unregister(lock);
    this._unhold();
  }

  _unhold() {
    this._held--;
    if (this._idle && this._held === 0) this._idle();
  }

  /** This client's id (32 hex characters). */
  get id() {
    if (this._closed) throw closedError();
    return native.clientId(this._h);
  }

  /** Counters and latency histograms of this client (local). */
  stats() {
    if (this._closed) throw closedError();
    return native.stats(this._h);
  }

  /**
   * Wait for the lock on name (FIFO). opts: ttl (lease ms, default the
   * client's), timeout (ms from now, or a Date), signal (AbortSignal),
   * autoRenew (true or a period in ms), kind ('mutex', 'semaphore',
   * 'shared', 'exclusive', 'election'), permits, of, value.
   */
  wait(name, opts, _kind) {
    if (this._closed) return Promise.reject(closedError());
    opts = opts || {};
    let req, timeout, ttl;
    try {
      req = requestOf(opts, _kind);
      timeout = timeoutOf(opts);
      ttl = ttlOf(opts.ttl, -1);
      if (opts.autoRenew) renewPeriod(opts.autoRenew); // refused here, not once granted
    } catch (err) {
      return Promise.reject(err);
    }
    const signal = opts.signal;
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    if (timeout === 0) {
      // Try once: the lock if it is free now, else RT_EWAITTIMEOUT.
      return this.tryLock(name, opts, _kind).then((l) => {
        if (l === null) throw makeError(E.RT_EWAITTIMEOUT);
        return l;
      });
    }
    return new Promise((resolve, reject) => {
      let lock = null;
      let weak = null; // once granted: the native side must not keep the Lock alive
      let aborted = false;
      let offAbort = null;
      const onEvent = (ev, status, code, message) => {
        if (ev === 1) {
          const l = lock || (weak && weak.deref());
          if (l) l._onLost(this._closeLost || makeError(status, code, message));
          return;
        }
        if (offAbort) offAbort();
        if (status === 0 && aborted) {
          // The grant crossed the abort: give it back.
          native.signal(handle, null);
          reject(abortError(signal));
          return;
        }
        if (status !== 0) {
          reject(aborted && status === E.RT_ECANCELED ? abortError(signal)
            : makeError(status, code, message));
          return;
        }
        lock._fence = native.lockFence(handle);
        if (opts.autoRenew) {
          const st = native.autoRenew(handle, renewPeriod(opts.autoRenew));
          if (st !== 0 && st !== E.RT_ELOST) {
            native.signal(handle, null);
            reject(makeError(st));
            return;
          }
        }
        this._hold(lock);
        weak = new WeakRef(lock);
        resolve(lock);
        // The native side keeps onEvent (and so this scope) until the handle
        // ends: keep neither the Lock nor the promise that holds it.
        lock = null;
        resolve = reject = null;
      };
      let handle;
      try {
        handle = native.wait(this._h, name, req, ttl, timeout, onEvent);
      } catch (err) {
        reject(asRedturn(err));
        return;
      }
      lock = new Lock(this, name, handle, req.kind);
      if (signal) {
        offAbort = onAbortOf(signal, () => {
          aborted = true;
          native.cancel(handle);
        });
      }
    });
  }

  /** Take the lock only if it is free now and nobody waits: the Lock, or null. */
  tryLock(name, opts, _kind) {
    if (this._closed) return Promise.reject(closedError());
    opts = opts || {};
    let req, ttl;
    try {
      req = requestOf(opts, _kind);
      ttl = ttlOf(opts.ttl, -1);
      if (opts.autoRenew) renewPeriod(opts.autoRenew); // refused here, not once granted
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      let lock = null;
      let weak = null;
      const onEvent = (ev, status, code, message) => {
        if (ev === 1) {
          const l = lock || (weak && weak.deref());
          if (l) l._onLost(this._closeLost || makeError(status, code, message));
          return;
        }
        if (status === E.RT_EBUSY) return resolve(null);
        if (status !== 0) return reject(makeError(status, code, message));
        lock._fence = native.lockFence(handle);
        if (opts.autoRenew) {
          native.autoRenew(handle, renewPeriod(opts.autoRenew));
        }
        this._hold(lock);
        weak = new WeakRef(lock);
        resolve(lock);
        // The native side keeps onEvent (and so this scope) until the handle
        // ends: keep neither the Lock nor the promise that holds it.
        lock = null;
        resolve = reject = null;
      };
      let handle;
      try {
        handle = native.tryLock(this._h, name, req, ttl, onEvent);
      } catch (err) {
        reject(asRedturn(err));
        return;
      }
      lock = new Lock(this, name, handle, req.kind);
    });
  }

  /** Read side of a read-write lock (shared with the other readers). */
  readLock(name, opts) { return this.wait(name, opts, 'shared'); }

  /** Write side of a read-write lock (exclusive). */
  writeLock(name, opts) { return this.wait(name, opts, 'exclusive'); }

  /** permits (default 1) of a semaphore of `of` permits. */
  semaphore(name, opts) {
    opts = Object.assign({ permits: 1 }, opts);
    if (typeof opts.of !== 'number') {
      return Promise.reject(new RedturnError('RT_EINVAL',
        'semaphore(name, { of }) needs of: the number of permits', E.RT_EINVAL));
    }
    return this.wait(name, opts, 'semaphore');
  }

  /** Campaign in the election name with value: resolves once leader. */
  campaign(name, value, opts) {
    return this.wait(name, Object.assign({}, opts, { value: value === undefined ? undefined : String(value) }), 'election');
  }

  /**
   * Run fn(lock, signal) while holding the lock on name, then release it
   * (also if fn throws). signal (lock.signal) aborts if the lock is lost or
   * force-released by close(). The lease is renewed automatically unless
   * opts.autoRenew is false. Resolves with what fn returned.
   */
  async withLock(name, fn, opts) {
    if (typeof name === 'function' || typeof fn !== 'function') {
      throw new RedturnError('RT_EINVAL', 'withLock(name, fn, opts): fn must be a function', E.RT_EINVAL);
    }
    opts = Object.assign({ autoRenew: true }, opts);
    const lock = await this.wait(name, opts);
    let result;
    try {
      result = await fn(lock, lock.signal);
    } catch (err) {
      await lock.release().catch(() => {});
      throw err;
    }
    await lock.release();
    return result;
  }

  /** Wait for every name, all or nothing (mutexes; no deadlock between overlapping sets). */
  waitAll(names, opts) {
    if (this._closed) return Promise.reject(closedError());
    opts = opts || {};
    let timeout, ttl;
    try {
      timeout = timeoutOf(opts);
      if (timeout === 0) timeout = 1; // the native waitAll takes no try-once
      ttl = ttlOf(opts.ttl, -1);
    } catch (err) {
      return Promise.reject(err);
    }
    const signal = opts.signal;
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    return new Promise((resolve, reject) => {
      let multi = null;
      let aborted = false;
      let offAbort = null;
      let handle;
      const cb = (status, code, message) => {
        if (offAbort) offAbort();
        if (status !== 0) {
          reject(aborted && status === E.RT_ECANCELED ? abortError(signal)
            : makeError(status, code, message));
          return;
        }
        multi.fences = native.multiFences(handle);
        if (aborted) {
          multi.release().catch(() => {});
          reject(abortError(signal));
          return;
        }
        this._hold(multi);
        resolve(multi);
      };
      try {
        handle = native.waitAll(this._h, names, ttl, timeout, cb);
      } catch (err) {
        reject(asRedturn(err));
        return;
      }
      multi = new MultiLock(this, names.slice(), handle);
      if (signal) {
        offAbort = onAbortOf(signal, () => {
          aborted = true;
          native.cancelAll(handle);
        });
      }
    });
  }

  /** A snapshot of the resource's queue (holder, fence, waiters, ...). */
  inspect(name, opts) {
    if (this._closed) return Promise.reject(closedError());
    const max = opts && opts.maxWaiters !== undefined ? opts.maxWaiters : 100;
    return new Promise((resolve, reject) => {
      native.inspect(this._h, name, max, (status, code, message, info) => {
        if (status === 0) resolve(info);
        else reject(makeError(status, code, message));
      });
    }).catch((err) => { throw asRedturn(err); });
  }

  /** Whether anyone holds name now. */
  isLocked(name) {
    if (this._closed) return Promise.reject(closedError());
    return new Promise((resolve, reject) => {
      native.locked(this._h, name, (status, code, message, locked) => {
        if (status === 0) resolve(locked);
        else reject(makeError(status, code, message));
      });
    }).catch((err) => { throw asRedturn(err); });
  }

  /**
   * Observe the election name: an async iterator of its leaders (an object
   * {id, value, fence, deadline}, or null when nobody leads), the current
   * one first, then every change. Ends with break/return, opts.signal, or
   * the client's close; throws the observer's last error otherwise.
   */
  observe(name, opts) {
    const signal = opts && opts.signal;
    const queue = [];
    const waiters = [];
    let ended = false;
    let failure = null;
    let handle = null;
    const client = this;
    const finish = (err) => {
      if (ended) return;
      ended = true;
      failure = err;
      if (offAbort) offAbort();
      while (waiters.length) {
        const w = waiters.shift();
        if (err) w.reject(err);
        else w.resolve({ value: undefined, done: true });
      }
    };
    const stop = () => {
      if (handle) native.observeStop(handle);
      finish(null);
    };
    let offAbort = null;
    const start = () => {
      if (handle || ended) return;
      if (signal && signal.aborted) return finish(null);
      handle = native.observe(client._h, name, (status, code, message, leader) => {
        if (status === E.RT_EDISCONNECTED) return;
        if (status === E.RT_ECANCELED) return finish(null);
        if (status !== 0) return finish(makeError(status, code, message));
        const l = leaderOf(leader);
        if (waiters.length) waiters.shift().resolve({ value: l, done: false });
        else queue.push(l);
      });
      if (signal) offAbort = onAbortOf(signal, stop);
    };
    return {
      [Symbol.asyncIterator]() { return this; },
      next() {
        try {
          if (client._closed && !handle && !ended) throw closedError();
          start();
        } catch (err) {
          return Promise.reject(asRedturn(err));
        }
        if (queue.length) return Promise.resolve({ value: queue.shift(), done: false });
        if (ended) {
          if (failure) {
            const f = failure;
            failure = null;
            return Promise.reject(f);
          }
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
      },
      return() {
        stop();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  /**
   * Close gracefully: new requests reject with RT_ECLOSED and pending waits
   * with RT_ECANCELED at once; then close waits until every held lock is
   * released (withLock bodies finish), for at most opts.timeout ms (default:
   * no bound). Locks still held then are force-released: each emits 'lost'
   * (RT_ELOST) and aborts its signal first, then they are released in Redis.
   * Then the connections close and nothing of this client keeps the process
   * alive.
   */
  close(opts) {
    if (this._closing) return this._closing;
    let timeout;
    try {
      timeout = opts && opts.timeout !== undefined && opts.timeout !== Infinity
        ? Math.max(0, ms(opts.timeout, 'timeout')) : Infinity;
    } catch (err) {
      return Promise.reject(err);
    }
    this._closed = true;
    if (this._offSignals) this._offSignals();
    native.closeItems(this._h, false); // pending waits: RT_ECANCELED
    this._closing = (async () => {
      if (this._held > 0) {
        let timer = null;
        await new Promise((resolve) => {
          this._idle = resolve;
          if (timeout !== Infinity) timer = setTimeout(resolve, timeout);
        });
        this._idle = null;
        if (timer) clearTimeout(timer);
        const err = makeError(E.RT_ELOST, 'RT_ELOST',
          'lock force-released by close() after its timeout');
        this._closeLost = err;
        native.closeItems(this._h, true); // each held Lock's _onLost

      }
      await new Promise((resolve) => {
        const st = native.close(this._h, () => resolve());
        if (st !== 0) resolve();
      });
    })();
    return this._closing;
  }

  /**
   * On SIGTERM and SIGINT (or opts.signals), close(opts) — by default with
   * opts.timeout 10000 ms — and then let the signal take its default course
   * (unless the application has its own listener for it). Returns a
   * function that removes the handlers; close() removes them too.
   */
  closeOnSignals(opts) {
    opts = opts || {};
    const signals = opts.signals || ['SIGTERM', 'SIGINT'];
    const closeOpts = { timeout: opts.timeout === undefined ? 10000 : opts.timeout };
    const handlers = new Map();
    const off = () => {
      for (const [sig, h] of handlers) process.removeListener(sig, h);
      handlers.clear();
      if (this._offSignals === off) this._offSignals = null;
    };
    for (const sig of signals) {
      const h = () => {
        off();
        this.close(closeOpts).finally(() => {
          if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
        });
      };
      handlers.set(sig, h);
      process.on(sig, h);
    }
    if (this._offSignals) this._offSignals();
    this._offSignals = off;
    return off;
  }
}

module.exports = {
  connect,
  Client,
  Lock,
  MultiLock,
  RedturnError,
  errors: Object.freeze(Object.assign({}, E)),
  version: native.version,
  addonPath: native.addonPath,
};
