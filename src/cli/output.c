/* Output helpers: durations for humans, and resource names (arbitrary
 * bytes) written safely for a terminal, for JSON and for Prometheus. */
#include <inttypes.h>
#include <string.h>
#include <uv.h>

#include "cli.h"

uint64_t cli_now_ms(void) { return uv_hrtime() / 1000000u; }

void cli_fmt_ms(char *buf, size_t cap, int64_t ms) {
  const char *sign = ms < 0 ? "-" : "";
  uint64_t v = ms < 0 ? (uint64_t)0 - (uint64_t)ms : (uint64_t)ms;
  if (v < 1000)
    snprintf(buf, cap, "%s%" PRIu64 " ms", sign, v);
  else if (v < 60000)
    snprintf(buf, cap, "%s%" PRIu64 ".%" PRIu64 " s", sign, v / 1000,
             v % 1000 / 100);
  else if (v < 3600000)
    snprintf(buf, cap, "%s%" PRIu64 "m%02" PRIu64 "s", sign, v / 60000,
             v % 60000 / 1000);
  else
    snprintf(buf, cap, "%s%" PRIu64 "h%02" PRIu64 "m", sign, v / 3600000,
             v % 3600000 / 60000);
}

/* Bytes of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  if (n == 0)
    return 0;
  if (s[0] < 0x80)
    return 1;
  size_t need;
  uint32_t cp;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    need = 2;
    cp = s[0] & 0x1fu;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    need = 3;
    cp = s[0] & 0x0fu;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    need = 4;
    cp = s[0] & 0x07u;
  } else {
    return 0;
  }
  if (n < need)
    return 0;
  for (size_t i = 1; i < need; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  /* No overlong forms, no surrogates, nothing past U+10FFFF. */
  if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return need;
}

enum { ESC_TEXT, ESC_JSON, ESC_PROM };

static void put_escaped(FILE *f, const void *data, size_t len, int how) {
  const unsigned char *s = data;
  size_t i = 0;
  while (i < len) {
    unsigned char c = s[i];
    size_t n = utf8_len(s + i, len - i);
    if (n > 1) {
      fwrite(s + i, 1, n, f);
      i += n;
      continue;
    }
    i++;
    if (c == '\\') {
      fputs("\\\\", f);
    } else if (c == '"') {
      fputs("\\\"", f);
    } else if (c == '\n') {
      fputs("\\n", f);
    } else if (c == '\t' && how != ESC_PROM) {
      fputs("\\t", f);
    } else if (c == '\r' && how == ESC_JSON) {
      fputs("\\r", f);
    } else if (n == 1 && c >= 0x20 && c != 0x7f) {
      fputc(c, f);
    } else if (how == ESC_JSON) {
      fprintf(f, "\\u%04x", c);
    } else if (how == ESC_PROM) {
      fprintf(f, "\\\\x%02x", c);
    } else {
      fprintf(f, "\\x%02x", c);
    }
  }
}

void cli_put_text(FILE *f, const void *s, size_t len) {
  fputc('"', f);
  put_escaped(f, s, len, ESC_TEXT);
  fputc('"', f);
}

/* Bytes of a resource name shown in messages. */
#define NAME_SHOWN 64

void cli_put_name(FILE *f, const void *s, size_t len) {
  const unsigned char *b = s;
  size_t cut = NAME_SHOWN;
  if (len <= NAME_SHOWN) {
    cli_put_text(f, s, len);
    return;
  }
  /* Do not split a UTF-8 character. */
  while (cut > NAME_SHOWN - 3 && (b[cut] & 0xc0) == 0x80)
    cut--;
  cli_put_text(f, s, cut);
  fprintf(f, "... (%zu bytes)", len);
}

void cli_put_json(FILE *f, const void *s, size_t len) {
  fputc('"', f);
  put_escaped(f, s, len, ESC_JSON);
  fputc('"', f);
}

void cli_put_prom(FILE *f, const void *s, size_t len) {
  put_escaped(f, s, len, ESC_PROM);
}
