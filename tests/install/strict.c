/* The public header as a user compiling strict ISO C sees it:
 * cc -std=c11 -pedantic -Werror -Wall -Wextra -c strict.c, with the parts
 * it includes from redturn/ (options and blocking calls below). With
 * SYSTEM_HEADER_FIRST a system header comes first, which needs
 * -D_POSIX_C_SOURCE=200809L (redturn.h stops with an #error otherwise). */
#ifdef SYSTEM_HEADER_FIRST
#include <stdio.h>
#endif
#include <redturn.h>

int strict_options_port(void);

int strict_options_port(void) {
  rt_options_t o;
  rt_options_init(&o);
  o.retry_first_connect = 1;
  return rt_options_check(&o, NULL, 0) == 0 ? o.port : -1;
}

rt_client_t *strict_blocking_client(const rt_blocking_t *b);

rt_client_t *strict_blocking_client(const rt_blocking_t *b) {
  return rt_blocking_client(b);
}
