// The tools `checksum` and `checksum_verify`: see checksum.h.
#include "checksum.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "json.h"

#define INPUT_PROPERTIES                                                                      \
  "\"text\":{\"type\":\"string\",\"description\":\"The text to digest, as its UTF-8 bytes. "  \
  "Give either text or data.\"},"                                                             \
  "\"data\":{\"type\":\"string\",\"description\":\"The bytes to digest, base64 (standard or " \
  "URL-safe alphabet, padding optional, whitespace ignored). Give either text or data.\"},"

#define ALGORITHM_NAMES "\"sha256\",\"sha1\",\"md5\",\"crc32\",\"adler32\",\"fnv1a32\",\"fnv1a64\""

const tool_def CHECKSUM_TOOLS[] = {
    {"checksum",
     "Compute a digest or checksum of a text or of base64 bytes: sha256, sha1, md5, crc32, "
     "adler32, fnv1a32 or fnv1a64, as lowercase hex; algorithm \"all\" returns a JSON object "
     "with every one.",
     "{\"type\":\"object\",\"properties\":{" INPUT_PROPERTIES
     "\"algorithm\":{\"type\":\"string\",\"enum\":[" ALGORITHM_NAMES ",\"all\"],"
     "\"description\":\"Which digest; \\\"all\\\" for every one.\"}},"
     "\"required\":[\"algorithm\"],\"additionalProperties\":false}"},
    {"checksum_verify",
     "Check a text or base64 bytes against an expected digest (hex, any case, optionally "
     "prefixed like \"sha256:\"). Without an algorithm it is inferred from the prefix or the "
     "digest's length. Returns JSON: match, algorithm, computed digest.",
     "{\"type\":\"object\",\"properties\":{" INPUT_PROPERTIES
     "\"expected\":{\"type\":\"string\",\"description\":\"The expected digest in hex, e.g. "
     "\\\"sha256:9f86d0...\\\" or \\\"cbf43926\\\".\"},"
     "\"algorithm\":{\"type\":\"string\",\"enum\":[" ALGORITHM_NAMES "],"
     "\"description\":\"The digest's algorithm, if the prefix or length does not say.\"}},"
     "\"required\":[\"expected\"],\"additionalProperties\":false}"},
};
const size_t CHECKSUM_TOOL_COUNT = sizeof CHECKSUM_TOOLS / sizeof CHECKSUM_TOOLS[0];

// A malloc'd printf. NULL only when out of memory.
static char *format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

// Copies at most 40 bytes of the (valid UTF-8) `s` for an error message,
// cut on a character boundary so the message stays valid UTF-8 (the host
// refuses a string result that is not), with "..." when shortened.
static void snippet(const char *s, size_t len, char out[48]) {
  size_t n = len;
  if (n > 40) {
    n = 40;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--;  // back to a lead byte
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) out[k++] = s[i] ? s[i] : '?';  // a NUL would end the message
  if (n < len) { memcpy(out + k, "...", 3); k += 3; }
  out[k] = '\0';
}

// ---- base64 ----

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Decodes base64 into a malloc'd buffer. On error returns NULL with a
// reason in `err` (out of memory is reported as such).
static uint8_t *b64_decode(const char *s, size_t len, size_t *out_len, char *err, size_t err_size) {
  uint8_t *out = malloc(len / 4 * 3 + 3);
  if (!out) { snprintf(err, err_size, "out of memory"); return NULL; }
  uint32_t acc = 0;
  size_t bits = 0, n = 0, digits = 0, pad = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') { pad++; continue; }
    int v = b64_value(c);
    if (v < 0 || pad) {
      snprintf(err, err_size, "is not base64: unexpected %s at offset %zu",
               pad ? "character after '=' padding" : "character", i);
      free(out);
      return NULL;
    }
    digits++;
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (uint8_t)(acc >> bits);
    }
  }
  // 4k+1 digits cannot come from whole bytes; padding, if any, must
  // complete the last group of four.
  if (digits % 4 == 1 || (pad && (digits + pad) % 4 != 0) || pad > 2) {
    snprintf(err, err_size, "is not base64: its length (%zu digits, %zu '=') is impossible", digits, pad);
    free(out);
    return NULL;
  }
  *out_len = n;
  return out;
}

// ---- shared argument handling ----

typedef struct {
  json_object args;
  const uint8_t *bytes;  // what to digest: text's bytes or decoded data
  size_t len;
  uint8_t *decoded;      // owned, when from data
} call_input;

static const char *ALLOWED_CHECKSUM[] = {"text", "data", "algorithm", NULL};
static const char *ALLOWED_VERIFY[] = {"text", "data", "expected", "algorithm", NULL};

// The string argument `key`, or NULL if absent; an error message in *err
// if present but not a string.
static const json_member *string_arg(const json_object *o, const char *key, char **err) {
  const json_member *m = json_get(o, key);
  if (m && m->kind != JSON_STRING)
    *err = format("argument `%s` must be a string, got %s", key, json_kind_name(m->kind));
  return m && m->kind == JSON_STRING ? m : NULL;
}

// Parses the arguments, refuses unknown ones, and picks the bytes from
// `text` or `data`. Returns CALL_OK or an error with its message in *err.
static call_status read_input(const char *args, size_t args_len, const char **allowed,
                              call_input *in, char **err) {
  char why[128];
  memset(in, 0, sizeof *in);
  if (!json_parse_object(args, args_len, &in->args, why, sizeof why)) {
    *err = format("arguments are not a valid JSON object: %s", why);
    return CALL_INVALID_INPUT;
  }
  for (size_t i = 0; i < in->args.count; i++) {
    const char *key = in->args.members[i].key;
    bool known = false;
    for (const char **a = allowed; *a; a++) known |= strcmp(*a, key) == 0;
    if (!known) {
      char name[48];
      snippet(key, strlen(key), name);
      *err = format("unknown argument `%s`", name);
      return CALL_INVALID_INPUT;
    }
  }
  const json_member *text = string_arg(&in->args, "text", err);
  if (*err) return CALL_INVALID_INPUT;
  const json_member *data = string_arg(&in->args, "data", err);
  if (*err) return CALL_INVALID_INPUT;
  if (!text == !data) {
    *err = format("give exactly one of the arguments `text` (a string) or `data` (base64 bytes)%s",
                  text ? ", not both" : "");
    return CALL_INVALID_INPUT;
  }
  if (text) {
    in->bytes = (const uint8_t *)text->str;
    in->len = text->str_len;
    return CALL_OK;
  }
  in->decoded = b64_decode(data->str, data->str_len, &in->len, why, sizeof why);
  if (!in->decoded) {
    *err = format("argument `data` %s", why);
    return strcmp(why, "out of memory") == 0 ? CALL_INTERNAL : CALL_INVALID_INPUT;
  }
  in->bytes = in->decoded;
  return CALL_OK;
}

static void input_free(call_input *in) {
  json_object_free(&in->args);
  free(in->decoded);
}

// The `algorithm` argument as a digest_algo; "all" (if allowed) gives
// *all = true. Absent: NULL with no error.
static const digest_algo *algorithm_arg(const json_object *o, bool allow_all, bool *all, char **err) {
  const json_member *m = string_arg(o, "algorithm", err);
  if (!m) return NULL;
  if (allow_all && strcmp(m->str, "all") == 0 && m->str_len == 3) { *all = true; return NULL; }
  const digest_algo *a = digest_find(m->str, m->str_len);
  if (!a) {
    char got[48];
    snippet(m->str, m->str_len, got);
    *err = format("argument `algorithm` must be one of sha256, sha1, md5, crc32, adler32, fnv1a32, "
                  "fnv1a64%s; got \"%s\"", allow_all ? ", all" : "", got);
  }
  return a;
}

// ---- the tools ----

static call_status tool_checksum(const char *args, size_t args_len, char **text) {
  call_input in;
  char *err = NULL;
  call_status st = read_input(args, args_len, ALLOWED_CHECKSUM, &in, &err);
  bool all = false;
  const digest_algo *algo = NULL;
  if (st == CALL_OK) {
    algo = algorithm_arg(&in.args, true, &all, &err);
    if (err) st = CALL_INVALID_INPUT;
    else if (!algo && !all) {
      err = format("argument `algorithm` is required: sha256, sha1, md5, crc32, adler32, fnv1a32, fnv1a64 or all");
      st = CALL_INVALID_INPUT;
    }
  }
  if (st != CALL_OK) {
    input_free(&in);
    *text = err;
    return st;
  }

  uint8_t raw[DIGEST_MAX];
  char hex[2 * DIGEST_MAX + 1];
  if (!all) {
    algo->fn(in.bytes, in.len, raw);
    digest_hex(raw, algo->size, hex);
    *text = format("%s", hex);
  } else {
    // {"sha256": "...", ...}: one line per algorithm, fixed size.
    char buf[1024];
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (const digest_algo *a = DIGEST_ALGOS; a->name; a++) {
      a->fn(in.bytes, in.len, raw);
      digest_hex(raw, a->size, hex);
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\n  \"%s\": \"%s\"", a == DIGEST_ALGOS ? "" : ",",
                            a->name, hex);
    }
    snprintf(buf + n, sizeof buf - n, "\n}");
    *text = format("%s", buf);
  }
  input_free(&in);
  return CALL_OK;
}

// Splits "sha256:ABCD..." into an optional algorithm and lowercase hex.
// Returns false (with *err set) if it is not such a digest.
static bool parse_expected(const json_member *m, const digest_algo **prefix, char *hex, size_t *hex_len,
                           char **err) {
  const char *s = m->str;
  size_t len = m->str_len;
  while (len && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) { s++; len--; }
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
  const char *colon = memchr(s, ':', len);
  *prefix = NULL;
  if (colon) {
    *prefix = digest_find(s, (size_t)(colon - s));
    if (!*prefix) {
      char got[48];
      snippet(s, (size_t)(colon - s), got);
      *err = format("argument `expected` has an unknown algorithm prefix \"%s\"", got);
      return false;
    }
    len -= (size_t)(colon - s) + 1;
    s = colon + 1;
  }
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!ok || i >= 2 * DIGEST_MAX) {
      char got[48];
      snippet(m->str, m->str_len, got);
      *err = ok ? format("argument `expected` is longer than any digest (%zu hex digits)", len)
                : format("argument `expected` must be a hex digest, got \"%s\"", got);
      return false;
    }
    hex[i] = (char)(c >= 'A' && c <= 'F' ? c + 32 : c);
  }
  hex[len] = '\0';
  *hex_len = len;
  if (len == 0) { *err = format("argument `expected` is empty"); return false; }
  return true;
}

static call_status tool_verify(const char *args, size_t args_len, char **text) {
  call_input in;
  char *err = NULL;
  call_status st = read_input(args, args_len, ALLOWED_VERIFY, &in, &err);
  const digest_algo *algo = NULL, *prefix = NULL;
  char want[2 * DIGEST_MAX + 1];
  size_t want_len = 0;
  if (st == CALL_OK) {
    bool unused = false;
    algo = algorithm_arg(&in.args, false, &unused, &err);
    const json_member *expected = err ? NULL : string_arg(&in.args, "expected", &err);
    if (!err && !expected) err = format("argument `expected` is required: the digest in hex");
    if (!err) parse_expected(expected, &prefix, want, &want_len, &err);
    if (!err && algo && prefix && algo != prefix)
      err = format("argument `algorithm` is %s but `expected` says %s", algo->name, prefix->name);
    if (!err && !algo) algo = prefix;
    if (!err && algo && want_len != 2 * algo->size)
      err = format("argument `expected` has %zu hex digits; a %s digest has %zu", want_len, algo->name,
                   2 * algo->size);
    if (err) st = CALL_INVALID_INPUT;
  }
  if (st != CALL_OK) {
    input_free(&in);
    *text = err;
    return st;
  }

  // Without an algorithm, try every one of the digest's size, strongest
  // first: 8 hex digits may be crc32, adler32 or fnv1a32.
  uint8_t raw[DIGEST_MAX];
  char got[2 * DIGEST_MAX + 1] = "";
  const digest_algo *first = NULL;
  for (const digest_algo *a = DIGEST_ALGOS; a->name; a++) {
    if (algo ? a != algo : 2 * a->size != want_len) continue;
    char hex[2 * DIGEST_MAX + 1];
    a->fn(in.bytes, in.len, raw);
    digest_hex(raw, a->size, hex);
    if (strcmp(hex, want) == 0) {
      *text = format("{\"match\":true,\"algorithm\":\"%s\",\"computed\":\"%s\"}", a->name, hex);
      input_free(&in);
      return CALL_OK;
    }
    if (!first) { first = a; memcpy(got, hex, sizeof hex); }
  }
  input_free(&in);
  if (!first) {
    *text = format("argument `expected` has %zu hex digits, which is no supported digest's length "
                   "(sha256 64, sha1 40, md5 32, fnv1a64 16, crc32/adler32/fnv1a32 8)", want_len);
    return CALL_INVALID_INPUT;
  }
  *text = format("{\"match\":false,\"algorithm\":\"%s\",\"computed\":\"%s\"}", first->name, got);
  return CALL_OK;
}

call_status checksum_call(const char *name, size_t name_len, const char *args, size_t args_len,
                          char **text) {
  call_status st;
  if (name_len == 8 && memcmp(name, "checksum", 8) == 0) st = tool_checksum(args, args_len, text);
  else if (name_len == 15 && memcmp(name, "checksum_verify", 15) == 0) st = tool_verify(args, args_len, text);
  else {
    // The host only calls listed tools, but stay total.
    char got[48];
    snippet(name, name_len, got);
    *text = format("no tool named \"%s\" in the checksum plugin", got);
    st = CALL_NOT_FOUND;
  }
  if (!*text) return CALL_INTERNAL;  // out of memory: plugin.c reports it with a static message
  return st;
}
