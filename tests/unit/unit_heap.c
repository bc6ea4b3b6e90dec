/* The min-heap, checked against a sorted array through random pushes,
 * pops and removals of arbitrary nodes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static uint64_t rng_state = 0x853c49e6748fea9bu;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int before(const rt__heap_node *a, const rt__heap_node *b) {
  return a->key != b->key ? a->key < b->key : a->order < b->order;
}

/* Links agree both ways, no child beats its parent, and the tree is
 * complete: positions 1..len are all there, none beyond. Returns the
 * number of nodes under n (n included). */
static size_t check_subtree(const rt__heap *h, const rt__heap_node *n,
                            size_t pos) {
  if (n == NULL)
    return 0;
  cr_assert_leq(pos, h->len, "a node at position %zu of %zu", pos, h->len);
  const rt__heap_node *kids[2] = {n->left, n->right};
  size_t count = 1;
  for (int k = 0; k < 2; k++) {
    if (kids[k] == NULL)
      continue;
    cr_assert_eq(kids[k]->parent, n, "at %zu", pos);
    cr_assert(!before(kids[k], n), "at %zu", pos);
    count += check_subtree(h, kids[k], 2 * pos + (size_t)k);
  }
  return count;
}

static void check_shape(const rt__heap *h) {
  if (h->root != NULL)
    cr_assert_null(h->root->parent);
  cr_assert_eq(check_subtree(h, h->root, 1), h->len);
}

Test(heap, empty_heap_has_no_min) {
  rt__heap h;

  rt__heap_init(&h);
  cr_assert_null(rt__heap_min(&h));
}

Test(heap, equal_keys_come_out_in_push_order) {
  rt__heap_node n[50];
  rt__heap h;
  size_t i;

  rt__heap_init(&h);
  for (i = 0; i < 50; i++) {
    n[i].key = i % 2 ? 5 : 7;
    rt__heap_push(&h, &n[i]);
  }
  for (i = 0; i < 50; i++) {
    rt__heap_node *m = rt__heap_min(&h);
    size_t want = i < 25 ? 2 * i + 1 : 2 * (i - 25);
    cr_assert_eq(m, &n[want], "pop %zu gave node %td, want %zu", i, m - n,
                 want);
    rt__heap_remove(&h, m);
  }
  cr_assert_null(rt__heap_min(&h));
}

Test(heap, removing_a_node_twice_or_one_never_pushed_is_harmless) {
  rt__heap_node a, b, stray;
  rt__heap h;

  rt__heap_init(&h);
  memset(&stray, 0, sizeof(stray)); /* like a calloc'ed node */
  rt__heap_remove(&h, &stray);
  a.key = 1;
  b.key = 2;
  rt__heap_push(&h, &a);
  rt__heap_push(&h, &b);
  rt__heap_remove(&h, &stray);
  cr_assert_eq(h.len, 2);
  rt__heap_remove(&h, &a);
  rt__heap_remove(&h, &a);
  cr_assert_eq(h.len, 1);
  cr_assert_eq(rt__heap_min(&h), &b);
  rt__heap_remove(&h, &b);
  cr_assert_null(rt__heap_min(&h));
  /* A removed node can go back in. */
  rt__heap_push(&h, &a);
  cr_assert_eq(rt__heap_min(&h), &a);
}

Test(heap, extreme_keys_order_correctly) {
  rt__heap_node lo, mid, hi;
  rt__heap h;

  rt__heap_init(&h);
  hi.key = INT64_MAX;
  lo.key = INT64_MIN;
  mid.key = 0;
  rt__heap_push(&h, &hi);
  rt__heap_push(&h, &mid);
  rt__heap_push(&h, &lo);
  cr_assert_eq(rt__heap_min(&h), &lo);
  rt__heap_remove(&h, &lo);
  cr_assert_eq(rt__heap_min(&h), &mid);
  rt__heap_remove(&h, &mid);
  cr_assert_eq(rt__heap_min(&h), &hi);
}

#define NNODES 3000

static rt__heap_node nodes[NNODES];
static int in_heap[NNODES];
/* The reference: the nodes in the heap, sorted by (key, order). */
static rt__heap_node *sorted[NNODES];
static size_t nsorted;

static void ref_insert(rt__heap_node *n) {
  size_t lo = 0, hi = nsorted;

  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (before(sorted[mid], n))
      lo = mid + 1;
    else
      hi = mid;
  }
  memmove(&sorted[lo + 1], &sorted[lo], (nsorted - lo) * sizeof(sorted[0]));
  sorted[lo] = n;
  nsorted++;
}

static void ref_remove(rt__heap_node *n) {
  size_t i;

  for (i = 0; i < nsorted && sorted[i] != n; i++)
    ;
  cr_assert_lt(i, nsorted);
  memmove(&sorted[i], &sorted[i + 1], (nsorted - i - 1) * sizeof(sorted[0]));
  nsorted--;
}

Test(heap, agrees_with_a_sorted_reference_over_random_operations) {
  rt__heap h;
  size_t op, removed_inner = 0;

  rt__heap_init(&h);
  nsorted = 0;
  for (op = 0; op < 200000; op++) {
    size_t i = (size_t)(rng() % NNODES);
    unsigned what = (unsigned)(rng() % 10);

    if (what == 0 && nsorted > 0) {
      rt__heap_node *m = rt__heap_min(&h);
      cr_assert_eq(m, sorted[0]);
      rt__heap_remove(&h, m);
      in_heap[m - nodes] = 0;
      ref_remove(m);
    } else if (!in_heap[i] && what < 6) {
      /* Few distinct keys, so ties (broken by push order) are common. */
      nodes[i].key = (int64_t)(rng() % 64) - 32;
      rt__heap_push(&h, &nodes[i]);
      in_heap[i] = 1;
      ref_insert(&nodes[i]);
    } else if (in_heap[i] && what >= 6) {
      removed_inner += h.root != &nodes[i];
      rt__heap_remove(&h, &nodes[i]);
      in_heap[i] = 0;
      ref_remove(&nodes[i]);
    }
    cr_assert_eq(h.len, nsorted);
    cr_assert_eq(rt__heap_min(&h), nsorted ? sorted[0] : NULL);
    if (op % 5003 == 0)
      check_shape(&h);
  }
  check_shape(&h);
  cr_assert_gt(removed_inner, 30000, "only %zu inner removals", removed_inner);

  /* Draining gives exactly the reference order. */
  for (op = 0; nsorted > 0; op++) {
    rt__heap_node *m = rt__heap_min(&h);
    cr_assert_eq(m, sorted[0]);
    rt__heap_remove(&h, m);
    ref_remove(m);
  }
  cr_assert_eq(h.len, 0);
}
