/* Cluster slot maps, redirects and Sentinel replies: see topology.h. */
#include <stdlib.h>
#include <string.h>

#include "topology.h"

/* ---- nodes --------------------------------------------------------------- */

static int is_text(const redisReply *r) {
  return r != NULL &&
         (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* A port as an integer reply or as decimal text: 0..65535, else -1. */
static int port_of(const redisReply *r) {
  uint64_t v;
  if (r != NULL && r->type == REDIS_REPLY_INTEGER)
    return r->integer >= 0 && r->integer <= 65535 ? (int)r->integer : -1;
  if (is_text(r) && rt__parse_u64(r->str, r->len, &v) == 0 && v <= 65535)
    return (int)v;
  return -1;
}

/* The host text r (nil or "?": unknown, kept as "") into a. */
static int set_host(rt__node_addr *a, const redisReply *r) {
  int unknown = r == NULL || r->type == REDIS_REPLY_NIL ||
                (is_text(r) && r->len == 1 && r->str[0] == '?');
  if (!unknown && !is_text(r))
    return RT_EPROTO;
  rt__free(a->host);
  a->host = rt__memdup(unknown ? "" : r->str, unknown ? 0 : r->len);
  return a->host != NULL ? 0 : RT_ENOMEM;
}

static int copy_addr(rt__node_addr *to, const rt__node_addr *from) {
  *to = *from;
  to->host = rt__strdup(from->host);
  return to->host != NULL ? 0 : RT_ENOMEM;
}

void rt__node_addrs_free(rt__node_addr *addrs, size_t n) {
  for (size_t i = 0; addrs != NULL && i < n; i++)
    rt__free(addrs[i].host);
  rt__free(addrs);
}

/* The value of field name in a flat field/value array, or NULL. */
static const redisReply *field(const redisReply *r, const char *name) {
  size_t nlen = strlen(name);
  if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
    return NULL;
  for (size_t i = 0; i < r->elements; i += 2) {
    const redisReply *k = r->element[i];
    if (is_text(k) && k->len == nlen && memcmp(k->str, name, nlen) == 0)
      return r->element[i + 1];
  }
  return NULL;
}

static int text_is(const redisReply *r, const char *s) {
  return is_text(r) && r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

/* ---- slot maps ------------------------------------------------------------ */

static void range_free(rt__slot_range *g) {
  rt__free(g->primary.host);
  rt__node_addrs_free(g->replicas, g->nreplicas);
}

void rt__slot_map_free(rt__slot_map *map) {
  for (size_t i = 0; map->ranges != NULL && i < map->n; i++)
    range_free(&map->ranges[i]);
  rt__free(map->ranges);
  map->ranges = NULL;
  map->n = 0;
  rt__node_addrs_free(map->idle, map->nidle);
  map->idle = NULL;
  map->nidle = 0;
}

/* A new zeroed range at the end of map (which has room for cap). */
static rt__slot_range *add_range(rt__slot_map *map, size_t *cap) {
  if (map->n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 8;
    rt__slot_range *g = rt__reallocarray(map->ranges, ncap, sizeof(*g));
    if (g == NULL)
      return NULL;
    map->ranges = g;
    *cap = ncap;
  }
  rt__slot_range *g = &map->ranges[map->n++];
  memset(g, 0, sizeof(*g));
  return g;
}

static int set_bounds(rt__slot_range *g, const redisReply *first,
                      const redisReply *last) {
  if (first == NULL || last == NULL || first->type != REDIS_REPLY_INTEGER ||
      last->type != REDIS_REPLY_INTEGER || first->integer < 0 ||
      first->integer > last->integer || last->integer >= RT__SLOTS)
    return RT_EPROTO;
  g->first = (int)first->integer;
  g->last = (int)last->integer;
  return 0;
}

static int by_first(const void *a, const void *b) {
  const rt__slot_range *x = a, *y = b;
  return (x->first > y->first) - (x->first < y->first);
}

/* Sort, and refuse overlapping ranges. */
static int finish_map(rt__slot_map *map) {
  if (map->n > 1)
    qsort(map->ranges, map->n, sizeof(*map->ranges), by_first);
  for (size_t i = 1; i < map->n; i++)
    if (map->ranges[i].first <= map->ranges[i - 1].last)
      return RT_EPROTO;
  return 0;
}

/* A CLUSTER SLOTS node: [host, port, id, ...]. */
static int slots_node(rt__node_addr *a, const redisReply *r) {
  if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
    return RT_EPROTO;
  a->port = port_of(r->element[1]);
  a->healthy = 1;
  if (a->port < 0)
    return RT_EPROTO;
  return set_host(a, r->element[0]);
}

static int slots_range(rt__slot_range *g, const redisReply *r) {
  if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3)
    return RT_EPROTO;
  int err = set_bounds(g, r->element[0], r->element[1]);
  if (err == 0)
    err = slots_node(&g->primary, r->element[2]);
  if (err != 0 || r->elements == 3)
    return err;
  g->replicas = rt__calloc(r->elements - 3, sizeof(*g->replicas));
  if (g->replicas == NULL)
    return RT_ENOMEM;
  for (size_t i = 3; i < r->elements && err == 0; i++) {
    g->nreplicas++;
    err = slots_node(&g->replicas[i - 3], r->element[i]);
  }
  return err;
}

int rt__slot_map_from_slots(const redisReply *r, rt__slot_map *map) {
  size_t cap = 0;
  int err = 0;

  memset(map, 0, sizeof(*map));
  if (r == NULL || r->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  for (size_t i = 0; i < r->elements && err == 0; i++) {
    rt__slot_range *g = add_range(map, &cap);
    err = g == NULL ? RT_ENOMEM : slots_range(g, r->element[i]);
  }
  if (err == 0)
    err = finish_map(map);
  if (err != 0)
    rt__slot_map_free(map);
  return err;
}

/* A CLUSTER SHARDS node: {ip, endpoint, port, tls-port, role, health}. */
static int shards_node(rt__node_addr *a, const redisReply *r) {
  const redisReply *endpoint = field(r, "endpoint"), *ip = field(r, "ip");
  const redisReply *port = field(r, "port"), *tls = field(r, "tls-port");
  const redisReply *health = field(r, "health");

  a->port = port != NULL ? port_of(port) : 0;
  a->tls_port = tls != NULL ? port_of(tls) : 0;
  a->healthy = health == NULL || text_is(health, "online");
  if (a->port < 0 || a->tls_port < 0 || (a->port == 0 && a->tls_port == 0))
    return RT_EPROTO;
  int unknown = endpoint == NULL || !is_text(endpoint) || endpoint->len == 0 ||
                text_is(endpoint, "?");
  return set_host(a, unknown ? ip : endpoint);
}

/* The nodes of one shard: its master into *primary, the others into a new
 * array. A master that is not online (a failed one that lost its slots
 * to a replica) counts as one of the others; with no online master at
 * all, primary->port stays 0. */
static int shard_nodes(const redisReply *nodes, rt__node_addr *primary,
                       rt__node_addr **replicas, size_t *n) {
  int err = 0, found = 0;
  if (nodes == NULL || nodes->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  *replicas =
      rt__calloc(nodes->elements ? nodes->elements : 1, sizeof(**replicas));
  if (*replicas == NULL)
    return RT_ENOMEM;
  for (size_t i = 0; i < nodes->elements && err == 0; i++) {
    const redisReply *node = nodes->element[i];
    const redisReply *health = field(node, "health");
    if (!found && text_is(field(node, "role"), "master") &&
        (health == NULL || text_is(health, "online"))) {
      found = 1;
      err = shards_node(primary, node);
    } else {
      err = shards_node(&(*replicas)[(*n)++], node);
    }
  }
  return err;
}

static int shard_ranges(rt__slot_map *map, size_t *cap, const redisReply *s) {
  const redisReply *slots = field(s, "slots");
  rt__node_addr primary = {0}, *replicas = NULL;
  size_t n = 0;
  int err = 0;

  if (slots == NULL || slots->type != REDIS_REPLY_ARRAY ||
      slots->elements % 2 != 0)
    return RT_EPROTO;
  err = shard_nodes(field(s, "nodes"), &primary, &replicas, &n);
  if (slots->elements == 0 && err == 0 &&
      (primary.port != 0 || primary.tls_port != 0)) {
    /* A shard serving nothing (yet), or so reported: see idle. */
    rt__node_addr *idle =
        rt__reallocarray(map->idle, map->nidle + 1, sizeof(*idle));
    if (idle == NULL)
      err = RT_ENOMEM;
    else
      map->idle = idle;
    if (err == 0)
      err = copy_addr(&map->idle[map->nidle], &primary);
    if (err == 0)
      map->nidle++;
  }
  /* A shard with no online master (master and replicas down, or a
   * failover not yet done) serves nothing now: its slots are a hole in
   * the map, whose calls wait for a later map, not a refusal of the map. */
  if (primary.port == 0 && primary.tls_port == 0)
    slots = NULL;
  for (size_t i = 0; slots != NULL && i < slots->elements && err == 0; i += 2) {
    rt__slot_range *g = add_range(map, cap);
    if (g == NULL) {
      err = RT_ENOMEM;
      break;
    }
    err = set_bounds(g, slots->element[i], slots->element[i + 1]);
    if (err == 0)
      err = copy_addr(&g->primary, &primary);
    if (err == 0 && n > 0) {
      g->replicas = rt__calloc(n, sizeof(*g->replicas));
      err = g->replicas == NULL ? RT_ENOMEM : 0;
      for (size_t k = 0; k < n && err == 0; k++, g->nreplicas++)
        err = copy_addr(&g->replicas[k], &replicas[k]);
    }
  }
  rt__free(primary.host);
  rt__node_addrs_free(replicas, n);
  return err;
}

int rt__slot_map_from_shards(const redisReply *r, rt__slot_map *map) {
  size_t cap = 0;
  int err = 0;

  memset(map, 0, sizeof(*map));
  if (r == NULL || r->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  for (size_t i = 0; i < r->elements && err == 0; i++)
    err = shard_ranges(map, &cap, r->element[i]);
  if (err == 0)
    err = finish_map(map);
  if (err != 0)
    rt__slot_map_free(map);
  return err;
}

const rt__slot_range *rt__slot_map_find(const rt__slot_map *map, int slot) {
  size_t lo = 0, hi = map->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const rt__slot_range *g = &map->ranges[mid];
    if (slot < g->first)
      hi = mid;
    else if (slot > g->last)
      lo = mid + 1;
    else
      return g;
  }
  return NULL;
}

/* ---- redirects ------------------------------------------------------------ */

static int starts_with(const char *s, size_t len, const char *word) {
  size_t wl = strlen(word);
  return len >= wl && memcmp(s, word, wl) == 0 && (len == wl || s[wl] == ' ');
}

/* "<slot> <host>:<port>" after MOVED or ASK. */
static int parse_target(const char *s, size_t len, rt__redirect *out) {
  const char *sp = memchr(s, ' ', len);
  uint64_t slot, port;
  if (sp == NULL || rt__parse_u64(s, (size_t)(sp - s), &slot) != 0 ||
      slot >= RT__SLOTS)
    return RT_EPROTO;
  const char *addr = sp + 1, *colon = NULL;
  size_t alen = len - (size_t)(addr - s);
  for (size_t i = 0; i < alen; i++)
    if (addr[i] == ':')
      colon = addr + i;
  if (colon == NULL || memchr(addr, ' ', alen) != NULL ||
      rt__parse_u64(colon + 1, alen - (size_t)(colon + 1 - addr), &port) != 0 ||
      port == 0 || port > 65535)
    return RT_EPROTO;
  out->slot = (int)slot;
  out->host = addr;
  out->host_len = (size_t)(colon - addr);
  out->port = (int)port;
  return 0;
}

int rt__redirect_parse(const char *s, size_t len, rt__redirect *out) {
  rt__redirect r = {0};
  int err = 0;
  if (s != NULL && starts_with(s, len, "MOVED")) {
    r.kind = RT__REDIRECT_MOVED;
    err = len > 6 ? parse_target(s + 6, len - 6, &r) : RT_EPROTO;
  } else if (s != NULL && starts_with(s, len, "ASK")) {
    r.kind = RT__REDIRECT_ASK;
    err = len > 4 ? parse_target(s + 4, len - 4, &r) : RT_EPROTO;
  } else if (s != NULL && starts_with(s, len, "TRYAGAIN")) {
    r.kind = RT__REDIRECT_TRYAGAIN;
  } else if (s != NULL && starts_with(s, len, "CLUSTERDOWN")) {
    r.kind = RT__REDIRECT_CLUSTERDOWN;
  }
  if (err == 0)
    *out = r;
  return err;
}

/* ---- Sentinel --------------------------------------------------------------- */

int rt__sentinel_master_addr(const redisReply *r, rt__node_addr *addr) {
  rt__node_addr a = {0};
  if (r != NULL && r->type == REDIS_REPLY_NIL)
    return 1;
  if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      !is_text(r->element[0]) || r->element[0]->len == 0)
    return RT_EPROTO;
  a.port = port_of(r->element[1]);
  a.healthy = 1;
  if (a.port <= 0)
    return RT_EPROTO;
  int err = set_host(&a, r->element[0]);
  if (err == 0)
    *addr = a;
  return err;
}

int rt__sentinel_master_info(const redisReply *r, rt__node_addr *addr,
                             uint64_t *epoch, int *failing) {
  static const char unknown[] = "ERR No such master";
  if (r != NULL && r->type == REDIS_REPLY_NIL)
    return 1;
  if (r != NULL && r->type == REDIS_REPLY_ERROR &&
      r->len >= sizeof(unknown) - 1 &&
      memcmp(r->str, unknown, sizeof(unknown) - 1) == 0)
    return 1;
  const redisReply *ip = field(r, "ip"), *ep = field(r, "config-epoch"),
                   *flags = field(r, "flags");
  uint64_t e;
  rt__node_addr a = {0};
  if (!is_text(ip) || ip->len == 0 || !is_text(ep) ||
      rt__parse_u64(ep->str, ep->len, &e) != 0 || !is_text(flags))
    return RT_EPROTO;
  a.port = port_of(field(r, "port"));
  a.healthy = 1;
  if (a.port <= 0)
    return RT_EPROTO;
  /* flags is a comma-separated list, e.g. "master,failover_in_progress". */
  int in_progress = 0;
  static const char fip[] = "failover_in_progress";
  for (size_t i = 0; i + sizeof(fip) - 1 <= flags->len; i++)
    if ((i == 0 || flags->str[i - 1] == ',') &&
        memcmp(flags->str + i, fip, sizeof(fip) - 1) == 0 &&
        (i + sizeof(fip) - 1 == flags->len ||
         flags->str[i + sizeof(fip) - 1] == ','))
      in_progress = 1;
  int err = set_host(&a, ip);
  if (err != 0)
    return err;
  *addr = a;
  *epoch = e;
  *failing = in_progress;
  return 0;
}

int rt__sentinel_peers(const redisReply *r, rt__node_addr **out, size_t *n) {
  rt__node_addr *peers = NULL;
  size_t got = 0;
  int err = 0;

  *out = NULL;
  *n = 0;
  if (r == NULL || r->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  if (r->elements == 0)
    return 0;
  peers = rt__calloc(r->elements, sizeof(*peers));
  if (peers == NULL)
    return RT_ENOMEM;
  for (size_t i = 0; i < r->elements && err == 0; i++) {
    const redisReply *ip = field(r->element[i], "ip");
    rt__node_addr *a = &peers[got++];
    a->port = port_of(field(r->element[i], "port"));
    a->healthy = 1;
    err = a->port <= 0 || !is_text(ip) || ip->len == 0 ? RT_EPROTO
                                                       : set_host(a, ip);
  }
  if (err != 0) {
    rt__node_addrs_free(peers, got);
    return err;
  }
  *out = peers;
  *n = got;
  return 0;
}

int rt__switch_master_parse(const char *s, size_t len, rt__switch_master *out) {
  const char *field_at[4];
  size_t field_len[4];
  size_t end = len;
  uint64_t port;

  /* The last four fields, right to left; the name is what is left. */
  for (int f = 3; f >= 0; f--) {
    size_t start = end;
    while (start > 0 && s[start - 1] != ' ')
      start--;
    if (start == 0 || start == end)
      return RT_EPROTO;
    field_at[f] = s + start;
    field_len[f] = end - start;
    end = start - 1;
  }
  if (end == 0 || rt__parse_u64(field_at[1], field_len[1], &port) != 0 ||
      rt__parse_u64(field_at[3], field_len[3], &port) != 0 || port == 0 ||
      port > 65535)
    return RT_EPROTO;
  out->name = s;
  out->name_len = end;
  out->host = field_at[2];
  out->host_len = field_len[2];
  out->port = (int)port;
  return 0;
}
