/* Memory of the fault suite's checkers (check.c and its rule files,
 * judge.c): growing arrays. */
#ifndef RT_FAULT_MEM_H
#define RT_FAULT_MEM_H

#include <stddef.h>

/* p (an array of elem-byte items with room for *cap) with room for need
 * items at least: *cap doubles (from 256) until it fits. Out of memory
 * ends the process (exit 2): a checker without memory cannot judge. */
void *rtf_grow(void *p, size_t *cap, size_t need, size_t elem);

#endif /* RT_FAULT_MEM_H */
