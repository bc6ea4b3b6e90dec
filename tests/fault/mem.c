/* Growing arrays for the fault suite's checkers (see mem.h). */
#include "mem.h"

#include <stdio.h>
#include <stdlib.h>

void *rtf_grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return p;
  size_t n = *cap ? *cap * 2 : 256;
  while (n < need)
    n *= 2;
  void *q = realloc(p, n * elem);
  if (q == NULL) {
    fprintf(stderr, "fault checker: out of memory\n");
    exit(2);
  }
  *cap = n;
  return q;
}
