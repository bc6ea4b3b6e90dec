/* Binary min-heap of intrusive nodes ordered by (key, order), used for
 * deadlines: equal keys come out in the order they went in. The nodes
 * link to each other (parent, left, right), so the heap never allocates:
 * arming a timeout cannot fail, even when memory is short. The node at
 * 1-based position p is reached from the root by the bits of p below its
 * top bit (0 left, 1 right), which finds the last node in O(log n). */
#include <string.h>

#include "common.h"

static int less(const rt__heap_node *a, const rt__heap_node *b) {
  if (a->key != b->key)
    return a->key < b->key;
  return a->order < b->order;
}

/* Where the link to n is kept: its parent's child pointer, or the root. */
static rt__heap_node **link_to(rt__heap *h, rt__heap_node *n) {
  if (n->parent == NULL)
    return &h->root;
  return n->parent->left == n ? &n->parent->left : &n->parent->right;
}

/* The node at 1-based position pos (1 <= pos <= h->len). */
static rt__heap_node *at(const rt__heap *h, size_t pos) {
  rt__heap_node *n = h->root;
  int bit = 0;
  while ((pos >> bit) > 1)
    bit++;
  while (bit-- > 0)
    n = (pos >> bit) & 1 ? n->right : n->left;
  return n;
}

/* Exchange child c with its parent p, links and all. */
static void swap_with_parent(rt__heap *h, rt__heap_node *c) {
  rt__heap_node *p = c->parent;
  rt__heap_node *cl = c->left, *cr = c->right;

  *link_to(h, p) = c;
  c->parent = p->parent;
  if (p->left == c) {
    c->left = p;
    c->right = p->right;
    if (c->right != NULL)
      c->right->parent = c;
  } else {
    c->right = p;
    c->left = p->left;
    if (c->left != NULL)
      c->left->parent = c;
  }
  p->parent = c;
  p->left = cl;
  p->right = cr;
  if (cl != NULL)
    cl->parent = p;
  if (cr != NULL)
    cr->parent = p;
}

static void sift_up(rt__heap *h, rt__heap_node *n) {
  while (n->parent != NULL && less(n, n->parent))
    swap_with_parent(h, n);
}

static void sift_down(rt__heap *h, rt__heap_node *n) {
  for (;;) {
    rt__heap_node *m = n->left;
    if (m == NULL)
      return;
    if (n->right != NULL && less(n->right, m))
      m = n->right;
    if (!less(m, n))
      return;
    swap_with_parent(h, m);
  }
}

static int contains(const rt__heap *h, const rt__heap_node *n) {
  return n->parent != NULL || h->root == n;
}

void rt__heap_init(rt__heap *h) { memset(h, 0, sizeof(*h)); }

void rt__heap_push(rt__heap *h, rt__heap_node *n) {
  n->order = h->counter++;
  n->left = n->right = NULL;
  h->len++;
  if (h->len == 1) {
    n->parent = NULL;
    h->root = n;
    return;
  }
  n->parent = at(h, h->len / 2);
  if (h->len % 2 == 0)
    n->parent->left = n;
  else
    n->parent->right = n;
  sift_up(h, n);
}

rt__heap_node *rt__heap_min(const rt__heap *h) { return h->root; }

void rt__heap_remove(rt__heap *h, rt__heap_node *n) {
  if (!contains(h, n))
    return; /* never pushed (zeroed), or removed already */
  rt__heap_node *last = at(h, h->len);
  *link_to(h, last) = NULL;
  h->len--;
  if (last != n) {
    /* The last node takes n's place, then finds its own. */
    *link_to(h, n) = last;
    last->parent = n->parent;
    last->left = n->left;
    last->right = n->right;
    if (last->left != NULL)
      last->left->parent = last;
    if (last->right != NULL)
      last->right->parent = last;
    if (last->parent != NULL && less(last, last->parent))
      sift_up(h, last);
    else
      sift_down(h, last);
  }
  n->parent = n->left = n->right = NULL;
}
