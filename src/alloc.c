/* The one place memory is obtained and returned. Every size computation
 * that multiplies is checked here, so callers never see a wrapped size. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* malloc(0) may return NULL, which callers would read as out of memory;
 * asking for one byte keeps "NULL means ENOMEM" true everywhere. */
static size_t nonzero(size_t size) { return size ? size : 1; }

void *rt__malloc(size_t size) { return malloc(nonzero(size)); }

void *rt__calloc(size_t n, size_t size) {
  if (n != 0 && size > SIZE_MAX / n)
    return NULL;
  if (n == 0 || size == 0)
    return calloc(1, 1);
  return calloc(n, size);
}

void *rt__realloc(void *ptr, size_t size) {
  /* realloc(p, 0) may free p and return NULL; never ask for that. */
  return realloc(ptr, nonzero(size));
}

void *rt__reallocarray(void *ptr, size_t n, size_t size) {
  if (n != 0 && size > SIZE_MAX / n)
    return NULL;
  return rt__realloc(ptr, n * size);
}

char *rt__strdup(const char *s) {
  if (s == NULL)
    return NULL;
  return rt__memdup(s, strlen(s));
}

void *rt__memdup(const void *p, size_t len) {
  char *copy;

  if (len == SIZE_MAX)
    return NULL;
  copy = malloc(len + 1);
  if (copy == NULL)
    return NULL;
  if (len > 0)
    memcpy(copy, p, len);
  copy[len] = '\0';
  return copy;
}

void rt__free(void *ptr) { free(ptr); }
