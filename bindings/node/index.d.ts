// TypeScript declarations of redturn for Node.js (lib/index.js).
/// <reference types="node" />
import { EventEmitter } from 'node:events';

/** The library's error names (RT_EWAITTIMEOUT, ...) and their numbers. */
export type ErrorCode =
  | 'RT_EINVAL' | 'RT_ENOCB' | 'RT_ENAMEEMPTY' | 'RT_ENAMETOOLONG' | 'RT_ETTL'
  | 'RT_ETIMEOUTARG' | 'RT_EURL' | 'RT_EPREFIX' | 'RT_ENOMEM' | 'RT_ECLOSED'
  | 'RT_ECANCELED' | 'RT_EWAITTIMEOUT' | 'RT_EBUSY' | 'RT_ERELEASED' | 'RT_ENOTHELD'
  | 'RT_EHELD' | 'RT_ELOST' | 'RT_ECONNECT' | 'RT_EAUTH' | 'RT_ETIMEDOUT'
  | 'RT_EDISCONNECTED' | 'RT_EWRONGTYPE' | 'RT_EREDIS' | 'RT_EPROTO' | 'RT_ENOPERM'
  | 'RT_EEVICTION' | 'RT_ESERVER' | 'RT_ETLS' | 'RT_ETLSVERIFY' | 'RT_ENOTSUP'
  | 'RT_EKIND' | 'RT_EREADONLY' | 'RT_EREPLICAS' | 'RT_ENOMODULE';

/** Every error this package rejects or throws with. */
export class RedturnError extends Error {
  /** The library's name of the error, e.g. 'RT_EWAITTIMEOUT'. */
  code: ErrorCode;
  /** The library's number of the error (negative). */
  errno: number;
  /** An aborted wait: 'AbortError' (code 'RT_ECANCELED', cause: the signal's reason). */
  name: 'RedturnError' | 'AbortError';
}

export const errors: Readonly<Record<ErrorCode, number>>;
/** The linked library's version, "MAJOR.MINOR.PATCH". */
export const version: string;
/** Where redturn.node was loaded from. */
export const addonPath: string;

export interface TlsOptions {
  /** PEM file of the CAs to trust (default: the system's). */
  ca?: string;
  /** Directory of hashed CA certificates. */
  caDir?: string;
  /** Client certificate and key files (PEM), for tls-auth-clients. */
  cert?: string;
  key?: string;
  /** Name sent as SNI and checked against the certificate (default: the host). */
  servername?: string;
  /** false: no certificate check at all (tests only). */
  rejectUnauthorized?: boolean;
}

export interface ConnectOptions {
  /** The URL, when connect(options) is called with one argument. */
  url?: string;
  host?: string;
  port?: number;
  db?: number;
  username?: string;
  password?: string;
  /** Key and channel prefix (default "rt"). */
  prefix?: string;
  /** Default lease in ms (default 30000). */
  ttl?: number;
  connectTimeout?: number;
  commandTimeout?: number;
  /** Shown by inspect() as the holder's and waiters' label. */
  label?: string;
  /** TLS: true, or the files to use (a rediss:// URL turns TLS on by itself). */
  tls?: boolean | TlsOptions;
  /** The Sentinels' own credentials, for redis-sentinel:// URLs. */
  sentinelUsername?: string;
  sentinelPassword?: string;
  /** Retry the first connect with backoff instead of failing. */
  retryFirstConnect?: boolean;
  /** Connect even if maxmemory-policy may evict keys. */
  allowEviction?: boolean;
  /** Report grants and releases only after this many replicas acknowledged them. */
  waitReplicas?: number;
  waitReplicasTimeout?: number;
}

export type LockKind = 'mutex' | 'semaphore' | 'shared' | 'exclusive' | 'election';

export interface WaitOptions {
  /** Lease in ms, at least 1 (else RT_ETTL; default: the client's ttl). */
  ttl?: number;
  /** Give up after this many ms, or at this Date: rejects with RT_EWAITTIMEOUT. 0 (or a past Date): try once. */
  timeout?: number | Date;
  /** Cancels the wait (its entry leaves the queue): rejects with an AbortError, code RT_ECANCELED. */
  signal?: AbortSignal;
  /** Renew the lease while held: true (every third of the TTL) or a period in ms. */
  autoRenew?: boolean | number;
  kind?: LockKind;
  /** Semaphore: permits to take (0: all) of `of`. */
  permits?: number;
  of?: number;
  /** Election: the candidate's value. */
  value?: string;
}

export interface TryLockOptions {
  ttl?: number;
  autoRenew?: boolean | number;
  kind?: LockKind;
  permits?: number;
  of?: number;
  value?: string;
}

export type ResourceName = string | Uint8Array;

/** A held lock: a mutex, semaphore permits, a read or write side, or leadership. */
export class Lock extends EventEmitter {
  readonly client: Client;
  readonly name: ResourceName;
  /** Fencing token: strictly increases per resource with every grant. */
  readonly fence: bigint;
  /** Request id as stored in Redis ("<client id>:<seq>"); null once released. */
  readonly id: string | null;
  /** Lease end by the Redis clock (ms since the epoch), as of the grant or last extend. */
  readonly deadline: number | null;
  /** Lease left now (ms), by the client's conservative estimate. */
  readonly leaseLeft: number;
  readonly state: 'held' | 'releasing' | 'lost' | 'released';
  /** True once the lock was lost (lease ran out, taken away, or force-released by close). */
  readonly lost: boolean;
  /** Aborts (reason: the RT_ELOST RedturnError) when the lock is lost; 'lost' is emitted first. */
  readonly signal: AbortSignal;
  /** Release and hand the lock to the next waiter; rejects RT_ELOST if it had been lost. */
  release(): Promise<void>;
  /** Push the lease to ttl ms from now (Redis clock). */
  extend(ttl?: number): Promise<void>;
  /** Renew automatically every `every` ms (default a third of the TTL); false stops. */
  autoRenew(every?: number | boolean): this;
  /** Ask Redis whether this lock is still held. */
  isOwned(): Promise<boolean>;
  /** Election: set the leader's value. */
  proclaim(value: string): Promise<void>;
  /** Election: step down (release). */
  resign(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
  /** The lease ran out, the lock was taken away, or close() force-released it (error code RT_ELOST); runs in the async context of the wait. */
  on(event: 'lost', listener: (err: RedturnError) => void): this;
  once(event: 'lost', listener: (err: RedturnError) => void): this;
}

/** Several resources held all-or-nothing. */
export class MultiLock {
  readonly client: Client;
  readonly names: ResourceName[];
  /** The fence of each resource, in the order of names. */
  readonly fences: bigint[];
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface Leader {
  /** The leader's request id. */
  id: string;
  value: string;
  fence: bigint;
  /** Lease end by the Redis clock (ms since the epoch), as of the change. */
  deadline: number;
}

export interface QueueInfo {
  locked: boolean;
  holder: string | null;
  holderClient: string | null;
  holderLabel: string | null;
  fence: bigint;
  leaseLeft: number;
  heldMs: number;
  queueLength: number;
  waiters: string[];
  waiterLabels: string[];
  serverTimeMs: number;
  /** "semaphore" (permits: how many), "rwlock" (read-write lock), "election", or null (mutex). */
  kind: string | null;
  permits: number;
  permitsUsed: number;
  holders: string[];
  holderPermits: number[];
  waiterPermits: number[];
}

/** Latencies in microseconds: p50Us and p99Us are within 3.1 % of the
 * recorded values at their rank and within [minUs, maxUs]; 0 when count is 0. */
export interface Histogram { count: number; minUs: number; maxUs: number; p50Us: number; p99Us: number }

export interface Stats {
  waits: number; tries: number; grants: number; busy: number; releases: number;
  lost: number; cancels: number; timeouts: number; failures: number;
  reconnects: number; pending: number; held: number;
  acquire: Histogram; hold: Histogram;
}

export class Client {
  /** This client's id (32 hex characters). */
  readonly id: string;
  /** Wait (FIFO) for the lock. */
  wait(name: ResourceName, opts?: WaitOptions): Promise<Lock>;
  /** The lock if it is free now and nobody waits, else null. */
  tryLock(name: ResourceName, opts?: TryLockOptions): Promise<Lock | null>;
  readLock(name: ResourceName, opts?: WaitOptions): Promise<Lock>;
  writeLock(name: ResourceName, opts?: WaitOptions): Promise<Lock>;
  /** `permits` (default 1) of a semaphore of `of` permits. */
  semaphore(name: ResourceName, opts: WaitOptions & { of: number; permits?: number }): Promise<Lock>;
  /** Campaign in an election: resolves once leader. */
  campaign(name: ResourceName, value?: string, opts?: WaitOptions): Promise<Lock>;
  /** Run fn while holding the lock (renewed unless autoRenew: false), release after; signal aborts if the lock is lost. */
  withLock<T>(name: ResourceName, fn: (lock: Lock, signal: AbortSignal) => T | Promise<T>, opts?: WaitOptions): Promise<T>;
  /** Every name, all or nothing. */
  waitAll(names: ResourceName[], opts?: Pick<WaitOptions, 'ttl' | 'timeout' | 'signal'>): Promise<MultiLock>;
  inspect(name: ResourceName, opts?: { maxWaiters?: number }): Promise<QueueInfo>;
  isLocked(name: ResourceName): Promise<boolean>;
  /** The election's leaders: the current one (null: nobody), then each change. */
  observe(name: ResourceName, opts?: { signal?: AbortSignal }): AsyncIterableIterator<Leader | null>;
  stats(): Stats;
  /**
   * Close gracefully: new requests reject RT_ECLOSED, pending waits RT_ECANCELED; then wait until
   * every held lock is released (withLock bodies finish), at most opts.timeout ms (default: no
   * bound); locks still held then emit 'lost' and abort their signal, and are released in Redis;
   * then close the connections.
   */
  close(opts?: CloseOptions): Promise<void>;
  /**
   * On SIGTERM and SIGINT (or opts.signals): close({ timeout: opts.timeout ?? 10000 }), then let the
   * signal end the process unless the application listens to it. Returns a function that removes
   * the handlers.
   */
  closeOnSignals(opts?: CloseOptions & { signals?: NodeJS.Signals[] }): () => void;
}

export interface CloseOptions {
  /** Wait at most this many ms for held locks to be released, then force-release them. */
  timeout?: number;
}

/** Connect to Redis (redis://, rediss://, redis-sentinel://, rediss-sentinel://, cluster seeds). */
export function connect(url: string, options?: ConnectOptions): Promise<Client>;
export function connect(options: ConnectOptions & { url?: string }): Promise<Client>;
