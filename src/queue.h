/* Intrusive circular doubly-linked lists (in the manner of libuv's queue):
 * a head is a node pointing at itself; items embed a node. */
#ifndef RT_QUEUE_H
#define RT_QUEUE_H

typedef struct rt__queue {
  struct rt__queue *next;
  struct rt__queue *prev;
} rt__queue;

static inline void rt__queue_init(rt__queue *q) { q->next = q->prev = q; }

static inline int rt__queue_empty(const rt__queue *q) { return q->next == q; }

static inline void rt__queue_insert_tail(rt__queue *head, rt__queue *n) {
  n->next = head;
  n->prev = head->prev;
  head->prev->next = n;
  head->prev = n;
}

/* Unlink n (it becomes an empty list, so removing twice is harmless). */
static inline void rt__queue_remove(rt__queue *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  rt__queue_init(n);
}

/* Move every node of from to the tail of to, leaving from empty. */
static inline void rt__queue_move(rt__queue *from, rt__queue *to) {
  if (rt__queue_empty(from))
    return;
  from->next->prev = to->prev;
  to->prev->next = from->next;
  from->prev->next = to;
  to->prev = from->prev;
  rt__queue_init(from);
}

#define rt__queue_data(ptr, type, field) rt__container_of(ptr, type, field)

#endif /* RT_QUEUE_H */
