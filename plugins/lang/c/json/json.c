// The strict flat-object JSON reader: see json.h.
#include "json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const unsigned char *s;
  size_t len, pos;
  char *err;
  size_t err_size;
} reader;

static bool fail(reader *r, const char *fmt, ...) {
  char what[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->err_size, "%s at byte %zu", what, r->pos);
  return false;
}

static void skip_ws(reader *r) {
  while (r->pos < r->len) {
    unsigned char c = r->s[r->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    r->pos++;
  }
}

static bool eat(reader *r, const char *word) {
  size_t n = strlen(word);
  if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n) != 0) return false;
  r->pos += n;
  return true;
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits after "\u".
static bool read_hex4(reader *r, uint32_t *out) {
  if (r->len - r->pos < 4) return fail(r, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(r->s[r->pos + i]);
    if (d < 0) return fail(r, "bad hex digit in \\u escape");
    v = v << 4 | (uint32_t)d;
  }
  r->pos += 4;
  *out = v;
  return true;
}

static size_t put_utf8(char *out, uint32_t cp) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

// Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one
// (overlong forms, surrogates and values past U+10FFFF are invalid).
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  uint32_t cp, min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; min = 0x80; }
  else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; min = 0x800; }
  else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; min = 0x10000; }
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

// A string starting at the opening quote. The unescaped text is never
// longer than the raw one, so one allocation of the raw size suffices.
static bool read_string(reader *r, char **out, size_t *out_len) {
  r->pos++;  // the opening quote
  size_t end = r->pos;
  while (end < r->len && r->s[end] != '"') end += r->s[end] == '\\' ? 2 : 1;
  if (end >= r->len) return fail(r, "unterminated string");

  char *buf = malloc(end - r->pos + 1);
  if (!buf) return fail(r, "out of memory");
  size_t n = 0;
  while (r->pos < end) {
    unsigned char c = r->s[r->pos];
    if (c < 0x20) { free(buf); return fail(r, "control character in string"); }
    if (c != '\\') {
      size_t k = utf8_seq(r->s + r->pos, end - r->pos);
      if (!k) { free(buf); return fail(r, "invalid UTF-8 in string"); }
      memcpy(buf + n, r->s + r->pos, k);
      n += k;
      r->pos += k;
      continue;
    }
    r->pos++;
    char e = (char)r->s[r->pos++];
    switch (e) {
      case '"': buf[n++] = '"'; break;
      case '\\': buf[n++] = '\\'; break;
      case '/': buf[n++] = '/'; break;
      case 'b': buf[n++] = '\b'; break;
      case 'f': buf[n++] = '\f'; break;
      case 'n': buf[n++] = '\n'; break;
      case 'r': buf[n++] = '\r'; break;
      case 't': buf[n++] = '\t'; break;
      case 'u': {
        uint32_t cp, lo;
        if (!read_hex4(r, &cp)) { free(buf); return false; }
        if (cp >= 0xdc00 && cp <= 0xdfff) { free(buf); return fail(r, "lone low surrogate"); }
        if (cp >= 0xd800 && cp <= 0xdbff) {
          // A high surrogate must be followed by an escaped low one.
          if (!eat(r, "\\u") || !read_hex4(r, &lo) || lo < 0xdc00 || lo > 0xdfff) {
            free(buf);
            return fail(r, "lone high surrogate");
          }
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        // "\uXXXX" is 6 bytes and yields at most 3; a pair is 12 for 4.
        n += put_utf8(buf + n, cp);
        break;
      }
      default:
        free(buf);
        r->pos--;
        return fail(r, "bad escape");
    }
  }
  // The scan for the closing quote may have stepped over it with a
  // trailing backslash ("\" at the very end): the loop above then stops
  // early, so check that we are really at the quote.
  if (r->pos != end || r->s[end] != '"') { free(buf); return fail(r, "unterminated string"); }
  r->pos = end + 1;
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return true;
}

// A number per the JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
static bool read_number(reader *r, double *out) {
  size_t start = r->pos, p = r->pos;
  const unsigned char *s = r->s;
#define DIGIT(i) ((i) < r->len && s[i] >= '0' && s[i] <= '9')
  if (p < r->len && s[p] == '-') p++;
  if (!DIGIT(p)) return fail(r, "bad number");
  if (s[p] == '0') p++;
  else while (DIGIT(p)) p++;
  if (p < r->len && s[p] == '.') {
    p++;
    if (!DIGIT(p)) { r->pos = p; return fail(r, "bad number"); }
    while (DIGIT(p)) p++;
  }
  if (p < r->len && (s[p] == 'e' || s[p] == 'E')) {
    p++;
    if (p < r->len && (s[p] == '+' || s[p] == '-')) p++;
    if (!DIGIT(p)) { r->pos = p; return fail(r, "bad number"); }
    while (DIGIT(p)) p++;
  }
#undef DIGIT
  // strtod needs a terminated copy; a longer literal is not a real argument.
  char tmp[64];
  if (p - start >= sizeof tmp) return fail(r, "number too long");
  memcpy(tmp, s + start, p - start);
  tmp[p - start] = '\0';
  *out = strtod(tmp, NULL);  // may be ±inf for 1e999: callers range-check
  r->pos = p;
  return true;
}

static bool read_member_value(reader *r, json_member *m) {
  if (r->pos >= r->len) return fail(r, "missing value");
  unsigned char c = r->s[r->pos];
  if (c == '"') { m->kind = JSON_STRING; return read_string(r, &m->str, &m->str_len); }
  if (c == '-' || (c >= '0' && c <= '9')) { m->kind = JSON_NUMBER; return read_number(r, &m->num); }
  if (eat(r, "true")) { m->kind = JSON_BOOL; m->boolean = true; return true; }
  if (eat(r, "false")) { m->kind = JSON_BOOL; m->boolean = false; return true; }
  if (eat(r, "null")) { m->kind = JSON_NULL; return true; }
  if (c == '{' || c == '[') return fail(r, "nested objects and arrays are not supported");
  return fail(r, "unexpected character");
}

bool json_parse_object(const char *src, size_t len, json_object *out, char *err, size_t err_size) {
  reader r = {(const unsigned char *)src, len, 0, err, err_size};
  memset(out, 0, sizeof *out);
  bool ok = false;
  skip_ws(&r);
  if (r.pos >= r.len || r.s[r.pos] != '{') { fail(&r, "expected a JSON object"); goto done; }
  r.pos++;
  skip_ws(&r);
  if (r.pos < r.len && r.s[r.pos] == '}') { r.pos++; goto end; }
  for (;;) {
    if (out->count == JSON_MAX_MEMBERS) { fail(&r, "more than %d members", JSON_MAX_MEMBERS); goto done; }
    json_member *m = &out->members[out->count];
    if (r.pos >= r.len || r.s[r.pos] != '"') { fail(&r, "expected a member name"); goto done; }
    size_t key_at = r.pos, key_len;
    if (!read_string(&r, &m->key, &key_len)) goto done;
    out->count++;  // from here json_object_free releases it
    if (strlen(m->key) != key_len) { r.pos = key_at; fail(&r, "NUL in member name"); goto done; }
    if (out->count > 1 && json_get(out, m->key) != m) {
      r.pos = key_at;
      fail(&r, "duplicate member \"%.32s\"", m->key);
      goto done;
    }
    skip_ws(&r);
    if (r.pos >= r.len || r.s[r.pos] != ':') { fail(&r, "expected ':'"); goto done; }
    r.pos++;
    skip_ws(&r);
    if (!read_member_value(&r, m)) goto done;
    skip_ws(&r);
    if (r.pos < r.len && r.s[r.pos] == ',') { r.pos++; skip_ws(&r); continue; }
    if (r.pos < r.len && r.s[r.pos] == '}') { r.pos++; break; }
    fail(&r, "expected ',' or '}'");
    goto done;
  }
end:
  skip_ws(&r);
  if (r.pos != r.len) { fail(&r, "trailing characters after the object"); goto done; }
  ok = true;
done:
  if (!ok) json_object_free(out);
  return ok;
}

const json_member *json_get(const json_object *o, const char *key) {
  for (size_t i = 0; i < o->count; i++)
    if (strcmp(o->members[i].key, key) == 0) return &o->members[i];
  return NULL;
}

const char *json_kind_name(json_kind kind) {
  switch (kind) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
  }
  return "?";
}

void json_object_free(json_object *o) {
  for (size_t i = 0; i < o->count; i++) {
    free(o->members[i].key);
    free(o->members[i].str);
  }
  memset(o, 0, sizeof *o);
}
