/* Binary min-heap of intrusive nodes ordered by (key, order), used for
 * deadlines: equal keys come out in the order they went in. Each node
 * knows its index, so any node can be removed in O(log n). */
#include <string.h>

#include "common.h"

#define HEAP_MIN_CAP 16

static int less(const rt__heap_node *a, const rt__heap_node *b) {
  if (a->key != b->key)
    return a->key < b->key;
  return a->order < b->order;
}

static void place(rt__heap *h, rt__heap_node *n, size_t i) {
  h->nodes[i] = n;
  n->index = i;
}

static void sift_up(rt__heap *h, size_t i) {
  rt__heap_node *n = h->nodes[i];

  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!less(n, h->nodes[parent]))
      break;
    place(h, h->nodes[parent], i);
    i = parent;
  }
  place(h, n, i);
}

static void sift_down(rt__heap *h, size_t i) {
  rt__heap_node *n = h->nodes[i];

  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= h->len)
      break;
    if (child + 1 < h->len && less(h->nodes[child + 1], h->nodes[child]))
      child++;
    if (!less(h->nodes[child], n))
      break;
    place(h, h->nodes[child], i);
    i = child;
  }
  place(h, n, i);
}

void rt__heap_init(rt__heap *h) { memset(h, 0, sizeof(*h)); }

void rt__heap_free(rt__heap *h) {
  rt__free(h->nodes);
  rt__heap_init(h);
}

int rt__heap_push(rt__heap *h, rt__heap_node *n) {
  if (h->len == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : HEAP_MIN_CAP;
    rt__heap_node **nodes;
    if (cap < h->cap)
      return RT_ENOMEM;
    nodes = rt__reallocarray(h->nodes, cap, sizeof(*nodes));
    if (nodes == NULL)
      return RT_ENOMEM;
    h->nodes = nodes;
    h->cap = cap;
  }
  n->order = h->counter++;
  h->nodes[h->len] = n;
  sift_up(h, h->len++);
  return 0;
}

rt__heap_node *rt__heap_min(const rt__heap *h) {
  return h->len > 0 ? h->nodes[0] : NULL;
}

void rt__heap_remove(rt__heap *h, rt__heap_node *n) {
  size_t i = n->index;
  rt__heap_node *last;

  /* A node that is not in this heap (never pushed, or removed already)
   * is left alone, so a second remove is harmless. */
  if (i >= h->len || h->nodes[i] != n)
    return;
  last = h->nodes[--h->len];
  n->index = SIZE_MAX;
  if (last == n)
    return;
  place(h, last, i);
  /* The moved node may belong above or below its new place. */
  if (i > 0 && less(last, h->nodes[(i - 1) / 2]))
    sift_up(h, i);
  else
    sift_down(h, i);
}
