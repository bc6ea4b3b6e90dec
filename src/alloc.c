/* The one place memory is obtained and returned. Every size computation
 * that multiplies is checked here, so callers never see a wrapped size.
 *
 * Each allocating function is also a libfiu fault point, "redturn/alloc":
 * in a build with FIU_ENABLE (the test build of the static library, see
 * REDTURN_FIU in CMakeLists.txt) a test can make any allocation fail, to
 * prove every RT_ENOMEM path. Without FIU_ENABLE the fault points are
 * nothing. */
#include <stdlib.h>
#include <string.h>

/* libfiu fault points: real ones with FIU_ENABLE (fiu-local.h then pulls in
 * fiu.h), nothing otherwise, without needing libfiu's headers. */
#ifdef FIU_ENABLE
#include <fiu-local.h>
#else
#define fiu_return_on(name, retval)
#endif

#include "common.h"

/* One fault point for every way the library obtains memory. */
#define RT__FAULT_ALLOC() fiu_return_on("redturn/alloc", NULL)

/* malloc(0) may return NULL, which callers would read as out of memory;
 * asking for one byte keeps "NULL means ENOMEM" true everywhere. */
static size_t nonzero(size_t size) { return size ? size : 1; }

void *rt__malloc(size_t size) {
  RT__FAULT_ALLOC();
  return malloc(nonzero(size));
}

void *rt__calloc(size_t n, size_t size) {
  RT__FAULT_ALLOC();
  if (n != 0 && size > SIZE_MAX / n)
    return NULL;
  if (n == 0 || size == 0)
    return calloc(1, 1);
  return calloc(n, size);
}

void *rt__realloc(void *ptr, size_t size) {
  /* A failed realloc leaves ptr as it was, like realloc(3). */
  RT__FAULT_ALLOC();
  /* realloc(p, 0) may free p and return NULL; never ask for that. */
  return realloc(ptr, nonzero(size));
}

void *rt__reallocarray(void *ptr, size_t n, size_t size) {
  if (n != 0 && size > SIZE_MAX / n)
    return NULL;
  return rt__realloc(ptr, n * size); /* the fault point is there */
}

char *rt__strdup(const char *s) {
  if (s == NULL)
    return NULL;
  return rt__memdup(s, strlen(s)); /* the fault point is there */
}

void *rt__memdup(const void *p, size_t len) {
  char *copy;

  RT__FAULT_ALLOC();
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
