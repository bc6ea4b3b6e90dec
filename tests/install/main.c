/* Links against an installed redturn and calls into it: proves the header,
 * the library and its dependencies are all found from the install tree. */
#include <stdio.h>

#include <redturn.h>

int main(void) {
  const char *version = rt_version_string();
  const char *lost = rt_strerror(RT_ELOST);

  if (version == NULL || version[0] == '\0') {
    fprintf(stderr, "rt_version_string() is empty\n");
    return 1;
  }
  if (lost == NULL || lost[0] == '\0') {
    fprintf(stderr, "rt_strerror(RT_ELOST) is empty\n");
    return 1;
  }
  if (rt_version() != RT_VERSION_HEX) {
    fprintf(stderr, "header version %#x, library version %#x\n",
            (unsigned)RT_VERSION_HEX, rt_version());
    return 1;
  }
  printf("redturn %s: RT_ELOST: %s\n", version, lost);
  return 0;
}
