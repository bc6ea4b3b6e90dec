/* redturn/options.h: the client configuration, part of redturn.h.
 *
 * rt_options_t (what rt_client_open() and rt_blocking_open() take), the
 * script paths and module states it and the statistics name, and the calls
 * that fill, check, resolve and free it. Not a header of its own: include
 * <redturn.h>, which includes this one (as uv.h includes uv/unix.h).
 */
#ifndef REDTURN_OPTIONS_H
#define REDTURN_OPTIONS_H

#ifndef REDTURN_H
#error "include redturn.h, not redturn/options.h"
#endif

/* ---- Client options ---------------------------------------------------- */

/* Client configuration. Initialise with rt_options_init(), then set fields.
 * Strings are copied by rt_client_open(); they need not outlive the call.
 * The struct may grow at its end in later versions (see size); code that
 * initialises it with rt_options_init() keeps working unchanged. */
typedef struct rt_options_s {
  /* sizeof(rt_options_t) as your program was compiled: set by
   * rt_options_init(), do not change it. The library reads only the first
   * size bytes (fields a shorter struct lacks take their defaults) and
   * refuses a longer struct that sets fields it does not know (RT_EINVAL).
   * 0 (a struct not made by rt_options_init) is refused with RT_EINVAL. */
  size_t size;
  /* "redis://[[username]:password@]host[:port][/db]". When set, it replaces
   * host, port and db as a whole (what it leaves out takes the defaults,
   * not those fields). username and password below fill what the URL
   * lacks (e.g. a secret kept out of the URL); giving one in both places
   * with different values is refused (RT_EINVAL), never silently dropped.
   * "rediss://" is the same with TLS (see tls); "unix://" is refused
   * (RT_EURL). More seeds may follow the first host, comma-separated
   * ("redis://a:7000,b:7001,c", port 6379 unless given, up to 16 after
   * the first): the first connect tries them in turn. A server with
   * cluster_enabled:1 is used as a Redis Cluster: each resource is served
   * by the shard that owns its slot, redirects are followed and the slot
   * map is kept current.
   * "redis-sentinel://[[username]:password@]host[:port][,host[:port]...]
   * [/db]#master" (up to 16 Sentinels, port 26379 unless given; the
   * credentials and db are the master's, the Sentinels' own are
   * sentinel_username and sentinel_password) finds the master through
   * the Sentinels: they are asked in turn for the master's address (the
   * one that answers is asked first next time), the server must say
   * ROLE master, and a +switch-master from a Sentinel, or a script call
   * answered READONLY, MASTERDOWN or LOADING, reconnects to the master
   * the Sentinels name then (the call is sent again there).
   * "rediss-sentinel://" talks TLS to the Sentinels and the master.
   * Any of these may end in a query, "?key=value&...", setting the options
   * script_path (auto, module, functions or eval), wait_replicas and
   * failover_fence_ms as those fields do (a field set too must agree:
   * RT_EINVAL), so a URL alone carries them (e.g. redturn -u).
   * Default NULL. */
  const char *url;
  /* Default "127.0.0.1". A name is resolved with uv_getaddrinfo (on
   * libuv's thread pool, never blocking the loop) at every connect, so a
   * reconnect follows a changed DNS record; IPv4 addresses are tried
   * before IPv6 ones. */
  const char *host;
  int port;               /* default 6379 */
  int db;                 /* default 0 */
  const char *username;   /* ACL user, or NULL (default) */
  const char *password;   /* or NULL (default) */
  const char *prefix;     /* key and channel prefix, default "rt" */
  int64_t default_ttl_ms; /* lease for RT_TTL_DEFAULT, default 30000 */
  /* Limit for one connect attempt: name resolution, TCP connect and the
   * handshake. Default 5000. */
  int64_t connect_timeout_ms;
  int64_t command_timeout_ms; /* default 5000 */
  /* Connect even if the server's maxmemory-policy may evict keys (anything
   * but noeviction): an evicted holder key frees a lock early. Default 0:
   * such a server fails the connect with RT_EEVICTION. */
  int allow_eviction;
  /* 1: a failed first connect is retried with the reconnect backoff (50 ms
   * doubling to 2 s, plus jitter), whatever the failure (refused, timeout,
   * resolution, AUTH, ...), instead of failing the client: for programs
   * that may start before Redis. connect_cb then runs once, with 0 when
   * connected or RT_ECANCELED when the client is closed first; meanwhile
   * rt_client_last_error() says why it is not connected yet, and requests
   * wait (bounded by their own timeouts); rt_blocking_open() returns only
   * once connected. Default 0: the first failure ends the client
   * (connect_cb gets it). */
  int retry_first_connect;
  /* A short text that says who waits or holds, e.g. "build-42" or
   * "host:pid": stored in Redis with each request of this client and shown
   * by rt_inspect() (rt_queue_info_t.holder_label, waiter_labels) and
   * `redturn inspect`. At most RT_LABEL_MAX bytes of printable ASCII
   * (0x20..0x7e, ':' included); anything else is refused (RT_EINVAL).
   * Default NULL (or ""): no label, and no byte of it in Redis. */
  const char *label;
  /* TLS: 1 talks TLS to Redis (a "rediss://" url does the same; a
   * "redis://" url with tls 1 is refused, RT_EINVAL). The server's
   * certificate must chain to a trusted CA and carry the host's name (or
   * IP address) unless tls_insecure is set. A handshake or protocol
   * failure, or a file OpenSSL cannot load (found at the first connect),
   * is RT_ETLS, a certificate refused RT_ETLSVERIFY;
   * rt_client_last_error() gives OpenSSL's reason. Default 0. The tls_*
   * fields below are refused (RT_EINVAL) when TLS is off, and a file that
   * is missing or unreadable at once. */
  int tls;
  /* PEM file of the CAs to trust; NULL (default): the system's CAs. */
  const char *tls_ca_file;
  /* Directory of hashed CA certificates (c_rehash), or NULL (default). */
  const char *tls_ca_dir;
  /* Client certificate (PEM, chain allowed) and its private key, for a
   * server that wants clients to prove who they are (Redis
   * tls-auth-clients). Both or neither. Default NULL. */
  const char *tls_cert_file;
  const char *tls_key_file;
  /* The name sent as SNI and checked against the certificate. Default NULL:
   * the host (of the url, or of the host field). */
  const char *tls_server_name;
  /* 1: no certificate or name check at all (the connection is encrypted
   * but anyone in the path can pose as the server): for tests only.
   * Default 0. */
  int tls_insecure;
  /* The Sentinels' own ACL user and password (sent as AUTH to each
   * Sentinel), for a redis-sentinel:// url; the url's credentials are the
   * master's. Default NULL: Sentinels without a password. */
  const char *sentinel_username;
  const char *sentinel_password;
  /* Replication safety: 0 (default) reports a grant as soon as the master
   * made it. N > 0 reports a grant, a try's success and a release only
   * after N replicas acknowledged it (Redis WAIT, up to
   * wait_replicas_timeout_ms, default 1000). Fewer acknowledgements
   * (replicas briefly missing, as during a failover) leave a wait waiting:
   * it asks Redis again, once per wait_replicas_timeout_ms, until the
   * replicas have its grant or its timeout passes (then RT_EWAITTIMEOUT,
   * rt_client_last_error() saying how many replicas acknowledged, and the
   * grant is given back); RT_FOREVER waits until they are back. A try
   * ends with RT_EREPLICAS (its grant given back first), and a release so
   * reported is done on the master all the same: see docs/FAILURES.md.
   * The URL parameter "?wait_replicas=N" sets it too. */
  int wait_replicas;
  int64_t wait_replicas_timeout_ms;
  /* How the client runs the protocol on Redis (rt_script_path_t):
   * RT_SCRIPT_PATH_AUTO (default) uses the redturn module's native
   * commands for every call but rt_evict's where the server has the
   * module (a version this client knows), and for the rest loads the Redis
   * Functions library at each connect and calls it with FCALL, or, where
   * FUNCTION LOAD is refused (an ACL without it), uses EVALSHA. Each connection decides on its own server (every node of a
   * cluster, each master after a failover). RT_SCRIPT_PATH_MODULE refuses
   * the connect to a server without the module, or with a version this
   * client does not speak (RT_ENOMODULE, "script_path module: ..."); RT_SCRIPT_PATH_FUNCTIONS refuses it where FUNCTION LOAD
   * is refused ("FUNCTION LOAD: <Redis's words>"); both leave the module
   * out (FUNCTIONS) or use it (MODULE) as said. RT_SCRIPT_PATH_EVAL
   * always uses EVALSHA, never the module. The URL parameter
   * "?script_path=auto|module|functions|eval" sets it too.
   * rt_client_stats() and rt_inspect() say which path ran. */
  int script_path;
  /* Exclusion across unplanned failovers (opt-in): after a server starts
   * serving as a new master (a replica promoted, or a master restarted,
   * as its replication id tells), it grants nothing for this many ms,
   * counted from the first request it sees, so that a lease granted by
   * its predecessor and lost with it ends first. Set it to the longest
   * lease (TTL) any client of these resources uses; every client must
   * use the same value. Cost: no grant for that long after every
   * failover, restart and first use of a server (waits queue; tries
   * fail busy), for every kind. Keeps one key per server (per slot on a
   * cluster). 0 (default): off. The URL parameter "?failover_fence_ms=H"
   * sets it too. See docs/DESIGN.md section 15, Fences and exclusion
   * across failovers. */
  int64_t failover_fence_ms;
} rt_options_t;

/* rt_options_t.script_path, rt_stats_t.script_path and
 * rt_queue_info_t.script_path. */
typedef enum {
  /* Options: the module where the server has it, and Functions where
   * FUNCTION LOAD is allowed, else EVALSHA. Stats: not connected yet. */
  RT_SCRIPT_PATH_AUTO = 0,
  /* The library "redturn_v<hash of its code>" (one per protocol version,
   * so clients of different versions share a server), loaded with
   * FUNCTION LOAD, called with FCALL (FCALL_RO for inspect, which runs on
   * read-only replicas too). A server that lost it (FUNCTION FLUSH, a
   * restart without persistence) gets it again and the call is retried. */
  RT_SCRIPT_PATH_FUNCTIONS = 1,
  /* EVALSHA of each script (EVAL after NOSCRIPT). */
  RT_SCRIPT_PATH_EVAL = 2,
  /* The redturn Redis module (module/README.md: redturn_module.so, loaded
   * with --loadmodule): the enqueue, try, release, reap, extend and
   * inspect of every kind (mutexes, read-write locks, semaphores,
   * elections) and an election's proclaim as native commands
   * (redturn.enqueue, redturn.pool_enqueue, ...), the same keys and
   * replies as the scripts, so clients with and without it share a
   * resource. rt_evict stays on the Functions library or EVALSHA. */
  RT_SCRIPT_PATH_MODULE = 3
} rt_script_path_t;

/* rt_stats_t.module: what the latest connect found of the redturn
 * module. */
typedef enum {
  /* Not connected yet, or not asked (RT_SCRIPT_PATH_FUNCTIONS or _EVAL
   * forced). */
  RT_MODULE_UNKNOWN = 0,
  /* Loaded, of a version this client knows: every call but the evict
   * uses it. */
  RT_MODULE_USED = 1,
  /* The server has no redturn module ("unknown command"). */
  RT_MODULE_ABSENT = 2,
  /* Loaded, of a version this client does not know (rt_stats_t.
   * module_version): the Lua path instead. */
  RT_MODULE_VERSION = 3,
  /* redturn.version refused otherwise (an ACL without it): the Lua
   * path. */
  RT_MODULE_REFUSED = 4
} rt_module_state_t;

/* Fill opts[0..size) with the defaults listed in rt_options_t and set
 * opts->size = size. Call it as rt_options_init(opts), which passes the
 * sizeof(rt_options_t) your program was compiled with. */
RT_EXTERN void rt_options_init_size(rt_options_t *opts, size_t size);
/* Fill *opts with the defaults listed in rt_options_t. */
#define rt_options_init(opts) rt_options_init_size((opts), sizeof(rt_options_t))

/* Check opts (NULL: the defaults) as rt_client_open() would, without
 * connecting: returns 0 or the same code (RT_EURL, RT_EPREFIX, RT_ETTL,
 * RT_ETIMEOUTARG, RT_EINVAL, RT_ENOMEM), and writes a
 * NUL-terminated message saying which field or URL part is wrong and why (e.g. "url: port
 * out of range (1..65535)"; "" when valid) into msg[0..len), truncated to fit. msg may
 * be NULL when len is 0. The message never repeats a password. */
RT_EXTERN int rt_options_check(const rt_options_t *opts, char *msg, size_t len);

/* For tools that talk to Redis themselves, so a URL and a resource name
 * mean to them what they mean to a client. rt_options_resolve() checks
 * opts (NULL: the defaults) as rt_client_open() would and returns 0 with
 * *out: a new rt_options_t with url NULL, host, port, db, username,
 * password and tls as the URL and the fields give them, and every default
 * filled in; its strings are its own. A redis-sentinel:// URL stays in
 * url (the master is known only by asking the Sentinels; host and port
 * are then the first Sentinel's). Free it with rt_options_free(). Errors are
 * rt_options_check()'s, with *out untouched. */
RT_EXTERN int rt_options_resolve(const rt_options_t *opts, rt_options_t **out);
RT_EXTERN void rt_options_free(rt_options_t *opts);

#endif /* REDTURN_OPTIONS_H */
