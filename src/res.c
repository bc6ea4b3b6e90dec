/* The client's resource table: a name, its Redis keys (made once, so a
 * script call never allocates for them), and what the lock state machine
 * keeps per resource, shared by reference. */
#include <string.h>

#include "locks.h"

rt__res *rt__res_get(rt_client_t *c, const void *name, size_t len) {
  rt__res *r = rt__map_get(&c->resources, name, len);
  if (r != NULL) {
    r->refs++;
    return r;
  }
  size_t base_len;
  char *base =
      rt__key_base(c->cfg.prefix, c->cfg.prefix_len, name, len, &base_len);
  if (base == NULL)
    return NULL;
  /* One block: the struct, the name (NUL-terminated), the keys. Made
   * once here, so sending a script call never allocates for its keys. */
  size_t key_len = base_len + 1;
  r = rt__malloc(sizeof(*r) + len + 1 + (RT__KEYS + RT__POOL_KEYS) * key_len);
  if (r == NULL) {
    rt__free(base);
    return NULL;
  }
  memset(r, 0, sizeof(*r));
  r->name = (char *)(r + 1);
  memcpy(r->name, name, len);
  r->name[len] = '\0';
  r->keys = r->name + len + 1;
  static const char suffixes[] = RT__KEY_SUFFIXES RT__POOL_KEY_SUFFIXES;
  for (size_t i = 0; i < RT__KEYS + RT__POOL_KEYS; i++) {
    memcpy(r->keys + i * key_len, base, base_len);
    r->keys[i * key_len + base_len] = suffixes[i];
  }
  r->key_len = (uint32_t)key_len;
  rt__free(base);
  if (rt__map_put(&c->resources, r->name, len, r) != 0) {
    rt__free(r);
    return NULL;
  }
  r->client = c;
  r->len = (uint32_t)len;
  r->refs = 1;
  rt__queue_init(&r->waiters);
  return r;
}

void rt__res_unref(rt__res *r) {
  if (--r->refs > 0)
    return;
  rt_client_t *c = r->client;
  rt__timeout_clear(&c->lp, &r->watchdog);
  rt__map_del(&c->resources, r->name, r->len);
  rt__free(r);
}
