/* Internal declarations shared by the library's files: allocation, parsed
 * configuration, the resource-to-key mapping, queue entries and grant
 * notices, a byte-keyed hash map and a min-heap. Everything here is pure
 * logic (no I/O), so it is unit-tested directly. */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "redturn.h"
#include "rt_protocol.h"

#define RT__UNUSED(x) ((void)(x))

#define rt__container_of(ptr, type, member)                                    \
  ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- alloc.c: the one place memory is obtained and returned ------------ */

void *rt__malloc(size_t size);
/* calloc with overflow check: NULL if n * size overflows. */
void *rt__calloc(size_t n, size_t size);
void *rt__realloc(void *ptr, size_t size);
/* reallocarray: NULL (ptr untouched) if n * size overflows. */
void *rt__reallocarray(void *ptr, size_t n, size_t size);
char *rt__strdup(const char *s);
/* Copy of len bytes plus a terminating NUL (so text stays printable). */
void *rt__memdup(const void *p, size_t len);
void rt__free(void *ptr);

/* ---- options.c: options checked and copied ------------------------- */

typedef struct rt__config {
  char *host;
  int port;
  int db;
  char *username; /* NULL if none */
  char *password; /* NULL if none */
  char *prefix;
  size_t prefix_len;
  int64_t default_ttl_ms;
  int64_t connect_timeout_ms;
  int64_t command_timeout_ms;
  int allow_eviction;
  int retry_first_connect;
  char *label; /* NULL if none */
  size_t label_len;
  /* A redis-sentinel:// URL: the Sentinels to ask for the master named
   * sentinel_master (NULL for any other URL); host and port are the
   * first Sentinel's (for messages). */
  struct rt__endpoint *sentinels;
  size_t nsentinels;
  char *sentinel_master;
  int sentinel_tls; /* rediss-sentinel:// */
  /* "redis://a,b:6380,...": the seeds after the first (host and port);
   * NULL if none. A cluster learns its nodes from any of them. */
  struct rt__endpoint *seeds;
  size_t nseeds;
  char *sentinel_username; /* the Sentinels' AUTH; each NULL if none */
  char *sentinel_password;
  int wait_replicas; /* 0: no WAIT */
  int64_t wait_replicas_timeout_ms;
  int64_t failover_fence_ms; /* 0: off */
  int tls;                   /* talk TLS (rediss:// or the tls option) */
  char *tls_ca_file;         /* each NULL if none */
  char *tls_ca_dir;
  char *tls_cert_file;
  char *tls_key_file;
  char *tls_server_name; /* NULL: the host */
  int tls_insecure;
  int script_path; /* rt_script_path_t */
} rt__config;

/* Check opts (NULL means all defaults) and copy them into *cfg, parsing
 * opts->url when set. Returns 0, RT_EURL, RT_EPREFIX, RT_ETTL,
 * RT_ETIMEOUTARG, RT_EINVAL (port out of 1..65535, db < 0, timeouts <= 0,
 * a bad label)
 * or RT_ENOMEM; on error *cfg holds nothing to free. */
int rt__config_init(rt__config *cfg, const rt_options_t *opts);
/* The same, writing what is wrong (or "") into msg[0..cap) when msg is not
 * NULL; this is rt_options_check(). */
int rt__config_load(rt__config *cfg, const rt_options_t *opts, char *msg,
                    size_t cap);
void rt__config_free(rt__config *cfg);

/* ---- url.c: the Redis URL grammar -------------------------------- */

typedef struct rt__endpoint {
  char *host; /* without the brackets of an IPv6 address */
  int port;
} rt__endpoint;
void rt__endpoints_free(rt__endpoint *list, size_t n);

/* The longest host name a URL or the host option may give (a DNS name
 * is at most 253 bytes): every host buffer holds one. */
#define RT__HOST_MAX 255

/* Parse "redis[s]://[[user]:password@]host[:port][,host[:port]...][/db]"
 * (seeds after the first into seeds, port 6379 unless given) into the
 * host, port, db, username and password of cfg, and tls (1 for rediss://)
 * (allocated strings; user and password are percent-decoded; host may be
 * "[v6addr]"). Fields absent from the URL keep their values. Returns 0,
 * RT_EURL or RT_ENOMEM.
 * "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
 * #master" (and "rediss-sentinel://") fills sentinels (port 26379 when
 * absent), sentinel_master (percent-decoded), sentinel_tls, and the
 * master's db, username and password, leaving host and port alone. */
int rt__parse_url(const char *url, rt__config *cfg);
/* The same, with the reason for RT_EURL ("url: port out of range ...")
 * in msg[0..cap) when msg is not NULL. */
int rt__parse_url_why(const char *url, rt__config *cfg, char *msg, size_t cap);
/* On error cfg is left unchanged. An empty user or password means none,
 * as does an empty username or password option. */

/* ---- args.c: request-argument checks ------------------------------ */

/* Format a message into msg (if any) and return err. */
int rt__why(char *msg, size_t cap, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 0, RT_ENAMEEMPTY (len 0 or name NULL) or RT_ENAMETOOLONG. */
int rt__check_name(const void *name, size_t len);
/* RT_TTL_DEFAULT gives dflt; 1..RT_TTL_MAX is kept; else RT_ETTL. */
int rt__resolve_ttl(int64_t ttl_ms, int64_t dflt, int64_t *out);
/* RT_FOREVER or > 0 is fine; else RT_ETIMEOUTARG. */
int rt__check_timeout(int64_t timeout_ms);

/* ---- keys.c: resource name to Redis keys, numbers, entries ------------- */

/* Keys per resource, and their suffixes in the order the scripts take
 * them: the queue, the holder, the members (lua/lib/prelude.lua). */
#define RT__KEYS 3
#define RT__KEY_SUFFIXES RT_PROTO_KEY_SUFFIXES
/* The same for a pool resource (semaphore, read-write lock): its
 * queue, the holders' HASH (at h too: one kind at a time), its members and
 * the holders' deadlines (lua/lib/pool.lua). A resource's keys are
 * the RT__KEYS ones, then these. */
#define RT__POOL_KEYS 4
#define RT__POOL_KEY_SUFFIXES RT_PROTO_POOL_KEY_SUFFIXES
/* Longest kind of a pool resource as the scripts take it, with
 * its NUL: "s:<N>" (N <= RT_PERMITS_MAX) or "rw". */
#define RT__KIND_MAX 16

/* The keys of one resource are "<prefix>:{<esc>}:" followed by q (the
 * waiters' LIST), h (the holder) or m (the live waiters' HASH); see
 * lua/lib/prelude.lua for what they hold. esc
 * is the name with '%', '{' and '}' written as "%25", "%7B" and "%7D".
 * The mapping is injective, and since esc has no braces every key of a
 * resource shares the hash tag {esc}, so they live in one cluster slot.
 * Returns a malloc'ed "<prefix>:{<esc>}:" (the caller appends a suffix
 * byte), its length in *out_len; NULL on ENOMEM. */
char *rt__key_base(const char *prefix, size_t prefix_len, const void *name,
                   size_t len, size_t *out_len);
/* The result is NUL-terminated and has two spare bytes, so the suffix and
 * a new NUL can be written in place at [*out_len] and [*out_len + 1]. */
/* Reverse of the escaping: decode esc[0..len) into out (capacity >= len).
 * Returns the decoded length, or -1 if esc is not a valid escape. */
long rt__unescape_name(const char *esc, size_t len, char *out);

/* A queue entry (request id) is "<client id>:<seq>", the client id being
 * 32 lowercase hex characters and seq decimal. */
#define RT__CLIENT_ID_LEN 32
#define RT__ENTRY_MAX 56
/* Writes the NUL-terminated entry into buf (cap >= RT__ENTRY_MAX); returns
 * its length. */
size_t rt__entry_format(char *buf, const char *client_id, uint64_t seq);
/* Parses an entry; client_id gets 32 chars + NUL. 0 or RT_EPROTO. */
int rt__entry_parse(const char *s, size_t len, char *client_id, uint64_t *seq);

/* Strict decimal parsers over s[0..len): no sign, no spaces, no overflow.
 * 0 or RT_EPROTO. */
int rt__parse_u64(const char *s, size_t len, uint64_t *out);
int rt__parse_i64(const char *s, size_t len, int64_t *out); /* '-' allowed */
/* Split s[0..len) at ':' into exactly nfields fields (pointers into s and
 * their lengths). 0 or RT_EPROTO. */
int rt__split_fields(const char *s, size_t len, const char **fields,
                     size_t *lens, size_t nfields);

/* ---- notice_parse.c: the notices Redis publishes ----------------------- */

/* A notice published on a client's channel:
 *   "g:<seq>:<fence>:<lease ms>:<deadline>[:<kind>:{<esc>}]"
 *                                  the request seq was granted;
 *                                  its lease ends at deadline (Redis clock,
 *                                  ms since the epoch); the scripts add the
 *                                  resource: its kind ("" a mutex, else as
 *                                  the pool scripts take it) and
 *                                  its escaped name in braces, so a grant
 *                                  of a request the client gave up on can
 *                                  be given back by its id;
 *   "n:<seq>:<deadline>"           the request seq is next in line; the
 *                                  lease in front of it ends at deadline;
 *   "l:<seq>"                      the request seq was evicted by an
 *                                  operator (redturn evict);
 * and on a resource's observe channel (an election's, lua/lib/pool.lua):
 *   "o:<fence>:<deadline>:<leader id>:<value>"  a leader (its id is
 *                                  "<client id>:<seq>": the value starts
 *                                  after its second ':'), or
 *   "o:<fence>:0::"                nobody leads (fence: the last one).
 * Numbers are decimal without sign, a grant's fence >= 1, fields
 * separated by ':'. */
typedef struct rt__notice {
  char kind;        /* 'g', 'n', 'l' or 'o' */
  uint64_t seq;     /* 'g', 'n', 'l' */
  uint64_t fence;   /* 'g', 'o' */
  int64_t lease_ms; /* 'g' only */
  int64_t deadline_ms;
  /* 'g' naming its resource: pointers into the parsed text (kind_len <
   * RT__KIND_MAX; esc has no braces), else NULL and 0. */
  const char *res_kind, *res_esc;
  size_t res_kind_len, res_esc_len;
  /* 'o': the leader's id (leader_len < RT__ENTRY_MAX; 0: nobody leads)
   * and value (value_len <= RT_VALUE_MAX), pointers into the text. */
  const char *leader, *value;
  size_t leader_len, value_len;
} rt__notice;
/* 0, or RT_EPROTO for anything else (never reads past len). */
int rt__notice_parse(const char *s, size_t len, rt__notice *out);

/* ---- map.c: open-addressing hash map, keys are byte strings ------------ */

/* The map does not copy keys: key memory must stay valid and unchanged
 * while the entry is in the map (keep it inside the value). */
typedef struct rt__map_slot { /* 24 bytes: one per entry and spare slot */
  const void *key;            /* NULL: empty; RT__MAP_TOMB: deleted */
  void *value;
  uint32_t klen; /* keys longer than UINT32_MAX are refused */
  uint32_t hash;
} rt__map_slot;

typedef struct rt__map {
  rt__map_slot *slots;
  size_t cap;  /* power of two, or 0 */
  size_t len;  /* live entries */
  size_t used; /* live + tombstones */
} rt__map;

void rt__map_init(rt__map *m);
void rt__map_free(rt__map *m); /* frees the table, not keys or values */
void *rt__map_get(const rt__map *m, const void *key, size_t klen);
/* Insert or replace. 0, RT_ENOMEM, or RT_EINVAL for a key longer than
 * UINT32_MAX bytes. */
int rt__map_put(rt__map *m, const void *key, size_t klen, void *value);
/* Remove; returns the value or NULL if absent. */
void *rt__map_del(rt__map *m, const void *key, size_t klen);
/* Iterate: start with *pos = 0; returns values until NULL. Do not insert
 * while iterating (deleting the returned entry is fine). */
void *rt__map_next(const rt__map *m, size_t *pos);
/* Values must not be NULL (NULL reads as absent). A put that replaces an
 * entry also adopts the new key pointer. With klen 0, key may be NULL. */

/* ---- heap.c: binary min-heap of intrusive nodes ------------------------ */

typedef struct rt__heap_node {
  int64_t key;
  uint64_t order; /* ties break by insertion order (set by push) */
  struct rt__heap_node *parent, *left, *right; /* kept by the heap */
} rt__heap_node;

typedef struct rt__heap {
  rt__heap_node *root;
  size_t len;
  uint64_t counter;
} rt__heap;

void rt__heap_init(rt__heap *h);
void rt__heap_push(rt__heap *h, rt__heap_node *n); /* never allocates */
rt__heap_node *rt__heap_min(const rt__heap *h);    /* NULL if empty */
void rt__heap_remove(rt__heap *h, rt__heap_node *n);
/* A node must be zeroed before its first push. Removing a node that is not
 * in h (zeroed, or removed already) is a no-op. */

/* ---- stats.c: latency histograms ---------------------------------------- */

/* Count one latency of us microseconds in h. */
void rt__hist_add(rt_histogram_t *h, uint64_t us);
/* The bucket counting us, and bucket i's range [*lo, *lo + *width) (the
 * last bucket also takes everything above it). */
size_t rt__hist_index(uint64_t us);
void rt__hist_bounds(size_t i, uint64_t *lo, uint64_t *width);

/* ---- jitter ------------------------------------------------------------ */

/* Next value of a per-client xorshift64 generator (state must be nonzero):
 * jitter for backoff and watchdogs, nothing that needs to be unguessable. */
static inline uint64_t rt__xorshift(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

#endif /* RT_COMMON_H */
