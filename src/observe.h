/* Observers of elections (rt_observe, observe.c): what the client's life
 * cycle (client.c) tells them. */
#ifndef RT_OBSERVE_H
#define RT_OBSERVE_H

#include "locks.h"

/* End every observer of c with status (RT_ECANCELED: the client closes;
 * else its first connect failed): each gets its last callback, and their
 * connection closes (c->observing_closed runs once it did). */
void rt__observe_end_all(rt_client_t *c, int status);

#endif /* RT_OBSERVE_H */
