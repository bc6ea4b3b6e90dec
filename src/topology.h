/* Where keys live on a Redis Cluster and where the master is behind
 * Sentinel: key slots, per-slot channel tags, and parsers of the replies
 * and messages that describe a topology (pure logic, no I/O). Every parser
 * takes explicit lengths and never reads past them. */
#ifndef RT_TOPOLOGY_H
#define RT_TOPOLOGY_H

#include <hiredis/hiredis.h>

#include "common.h"

/* ---- slot.c: key slots and per-slot channel tags --------------------- */

#define RT__SLOTS 16384

/* CRC16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's. */
uint16_t rt__crc16(const void *p, size_t len);

/* The slot of key[0..len): CRC16 of its hash tag (the bytes between the
 * first '{' and the first '}' after it, when there are any) or else of
 * the whole key, modulo 16384. */
int rt__key_slot(const void *key, size_t len);

/* A tag whose slot is slot (0..16383): RT__SLOT_TAG_LEN bytes from
 * '@'..'O' (printable, no braces), written NUL-terminated into out. A
 * channel "<prefix>:{<tag>}:<client id>" lives in that slot, so it is
 * served by the shard that owns every resource key of the slot. The same
 * slot always gives the same tag. */
#define RT__SLOT_TAG_LEN 4
void rt__slot_tag(int slot, char out[RT__SLOT_TAG_LEN + 1]);

/* ---- topology.c: cluster slot maps and redirects ---------------------- */

typedef struct rt__node_addr {
  char *host;   /* NUL-terminated copy; "" when Redis does not know it (use
                   the host the reply came from) */
  int port;     /* 0 if none */
  int tls_port; /* CLUSTER SHARDS' tls-port; 0 if none */
  int healthy;  /* CLUSTER SHARDS' health is "online" (CLUSTER SLOTS: 1) */
} rt__node_addr;

typedef struct rt__slot_range {
  int first, last; /* 0 <= first <= last < RT__SLOTS */
  rt__node_addr primary;
  rt__node_addr *replicas;
  size_t nreplicas;
} rt__slot_range;

/* Ranges sorted by first slot, none overlapping. idle: the online masters
 * of CLUSTER SHARDS's shards that list no slots (a master added, not yet
 * given slots, or Redis 7.2-7.4's report of a shard whose failed master
 * comes first: the shard's slots are those of that master, none, though
 * its promoted replica serves them; CLUSTER SLOTS tells which). */
typedef struct rt__slot_map {
  rt__slot_range *ranges;
  size_t n;
  rt__node_addr *idle;
  size_t nidle;
} rt__slot_map;

/* Parse a CLUSTER SLOTS reply (Redis 7: each range is [first, last,
 * primary, replica...], a node [host, port, id, metadata...]) or a
 * CLUSTER SHARDS reply (each shard {slots: [first, last, ...], nodes:
 * [{ip, endpoint, port, tls-port, role, health, ...}]}, as RESP2 flat
 * field/value arrays) into *map. 0, RT_EPROTO (a shape other than those,
 * a slot out of range, overlapping ranges, a shard with slots and no
 * master) or RT_ENOMEM; on error *map holds nothing to free. */
int rt__slot_map_from_slots(const redisReply *r, rt__slot_map *map);
int rt__slot_map_from_shards(const redisReply *r, rt__slot_map *map);
/* The range holding slot, or NULL if no node serves it. */
const rt__slot_range *rt__slot_map_find(const rt__slot_map *map, int slot);
void rt__slot_map_free(rt__slot_map *map);

/* What a cluster error reply asks of the client. */
enum {
  RT__REDIRECT_NONE = 0,   /* not a cluster error */
  RT__REDIRECT_MOVED,      /* the slot is served elsewhere: remap, resend */
  RT__REDIRECT_ASK,        /* this once, send ASKING then the command there */
  RT__REDIRECT_TRYAGAIN,   /* a multi-key command during resharding: retry */
  RT__REDIRECT_CLUSTERDOWN /* the cluster cannot serve now: retry later */
};

typedef struct rt__redirect {
  int kind;         /* RT__REDIRECT_* */
  int slot;         /* MOVED and ASK */
  const char *host; /* MOVED and ASK: into the parsed text; host_len 0
                       means the host of the connection that answered */
  size_t host_len;
  int port; /* MOVED and ASK */
} rt__redirect;

/* Classify an error reply's text s[0..len) (hiredis's str: without the
 * leading '-'): "MOVED <slot> <host>:<port>", "ASK <slot> <host>:<port>"
 * (host may be an IPv6 address, split at the last ':'), "TRYAGAIN ...",
 * "CLUSTERDOWN ...". 0 (kind RT__REDIRECT_NONE for any other error), or
 * RT_EPROTO for a MOVED or ASK whose slot or address is malformed. */
int rt__redirect_parse(const char *s, size_t len, rt__redirect *out);

/* ---- topology.c: Sentinel ------------------------------------------------ */

/* SENTINEL GET-MASTER-ADDR-BY-NAME's [ip, port] into *addr (host copied):
 * 0; 1 if the Sentinel answered nil (it does not monitor that name);
 * RT_EPROTO or RT_ENOMEM. */
int rt__sentinel_master_addr(const redisReply *r, rt__node_addr *addr);

/* SENTINEL MASTER <name>'s field/value array into *addr (ip and port, host
 * copied), *epoch (its config-epoch: the failover that made it master)
 * and *failing (1: its flags say a failover of it is in progress): 0; 1
 * if the Sentinel does not monitor that name (its "No such master" error,
 * or nil); RT_EPROTO or RT_ENOMEM. */
int rt__sentinel_master_info(const redisReply *r, rt__node_addr *addr,
                             uint64_t *epoch, int *failing);

/* SENTINEL SENTINELS <name>'s array of field/value arrays into a new
 * array of the other Sentinels' ip and port (*out, *n; *out NULL when
 * there are none). 0, RT_EPROTO or RT_ENOMEM. */
int rt__sentinel_peers(const redisReply *r, rt__node_addr **out, size_t *n);
void rt__node_addrs_free(rt__node_addr *addrs, size_t n);

/* A +switch-master message, "<name> <old ip> <old port> <new ip> <new
 * port>" (fields separated by single spaces; the name is everything before
 * the last four fields). */
typedef struct rt__switch_master {
  const char *name; /* into the parsed text */
  size_t name_len;
  const char *host; /* the new master's ip */
  size_t host_len;
  int port;
} rt__switch_master;
/* 0 or RT_EPROTO. */
int rt__switch_master_parse(const char *s, size_t len, rt__switch_master *out);

#endif /* RT_TOPOLOGY_H */
