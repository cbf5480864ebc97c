// Native tests of the checksum plugin's logic (built with the host's cc by
// test.sh, under AddressSanitizer and UBSan): known-answer tests for every
// digest, the tools end to end, hostile JSON, and a small mutation fuzz.
//   test_checksum          run the tests
//   test_checksum --dump   print every digest of 0..300 pattern bytes (test.sh
//                          compares them with Python's hashlib and zlib)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "digest.h"
#include "json.h"

static int passed, failed;

#define CHECK(cond, ...)                            \
  do {                                              \
    if (cond) passed++;                             \
    else {                                          \
      failed++;                                     \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
    }                                               \
  } while (0)

static void kat(const char *algo, const char *input, size_t len, const char *want) {
  const digest_algo *a = digest_find(algo, strlen(algo));
  uint8_t raw[DIGEST_MAX];
  char hex[2 * DIGEST_MAX + 1];
  a->fn((const uint8_t *)input, len, raw);
  digest_hex(raw, a->size, hex);
  CHECK(strcmp(hex, want) == 0, "%s(%.20s...) = %s, want %s", algo, input, hex, want);
}

// Calls a tool; checks the status and that the text equals `want` (or,
// for errors, contains it).
static void call(const char *tool, const char *args, call_status want_status, const char *want) {
  char *text = NULL;
  call_status st = checksum_call(tool, strlen(tool), args, strlen(args), &text);
  bool ok = st == want_status &&
            (st == CALL_OK ? strcmp(text, want) == 0 : strstr(text, want) != NULL);
  CHECK(ok, "%s %s -> [%d] %s; want [%d] %s", tool, args, st, text, want_status, want);
  free(text);
}

static void bad_json(const char *args, size_t len, const char *want) {
  json_object o;
  char err[128] = "";
  bool ok = json_parse_object(args, len, &o, err, sizeof err);
  CHECK(!ok && strstr(err, want), "json %.*s: ok=%d err=%s; want %s", (int)len, args, ok, err, want);
  if (ok) json_object_free(&o);
}

static void test_digests(void) {
  const char *fox = "The quick brown fox jumps over the lazy dog";
  const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  kat("md5", "", 0, "d41d8cd98f00b204e9800998ecf8427e");
  kat("md5", "abc", 3, "900150983cd24fb0d6963f7d28e17f72");
  kat("md5", fox, strlen(fox), "9e107d9d372bb6826bd81d3542a419d6");
  kat("sha1", "", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  kat("sha1", "abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
  kat("sha1", two_blocks, strlen(two_blocks), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  kat("sha256", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  kat("sha256", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  kat("sha256", two_blocks, strlen(two_blocks), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  char *million = malloc(1000000);
  memset(million, 'a', 1000000);
  kat("sha256", million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  kat("adler32", million, 1000000, "15d870f9");  // long input: exercises the modulo batching
  free(million);
  kat("crc32", "", 0, "00000000");
  kat("crc32", "123456789", 9, "cbf43926");
  kat("adler32", "", 0, "00000001");
  kat("adler32", "Wikipedia", 9, "11e60398");
  kat("fnv1a32", "", 0, "811c9dc5");
  kat("fnv1a32", "foobar", 6, "bf9cf968");
  kat("fnv1a64", "", 0, "cbf29ce484222325");
  kat("fnv1a64", "foobar", 6, "85944171f73967e8");
}

static void test_tools(void) {
  call("checksum", "{\"text\":\"abc\",\"algorithm\":\"sha256\"}", CALL_OK,
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  call("checksum", "{\"data\":\"YWJj\",\"algorithm\":\"md5\"}", CALL_OK, "900150983cd24fb0d6963f7d28e17f72");
  call("checksum", "{\"data\":\"YW Jj\\n\",\"algorithm\":\"md5\"}", CALL_OK, "900150983cd24fb0d6963f7d28e17f72");
  call("checksum", "{\"data\":\"YQ==\",\"algorithm\":\"crc32\"}", CALL_OK, "e8b7be43");  // "a"
  call("checksum", "{\"data\":\"YQ\",\"algorithm\":\"crc32\"}", CALL_OK, "e8b7be43");
  call("checksum", "{\"data\":\"__8\",\"algorithm\":\"crc32\"}", CALL_OK, "ffff0000");  // url-safe ff ff
  call("checksum", "{\"data\":\"\",\"algorithm\":\"crc32\"}", CALL_OK, "00000000");
  // Escapes decode to UTF-8 before hashing: "é😀" and "\u0000" are their bytes.
  call("checksum", "{\"text\":\"\\u00e9\\ud83d\\ude00\",\"algorithm\":\"sha1\"}", CALL_OK,
       "9c286deb5d7549eafd1dcb2b58e0b573bc1b4a97");
  call("checksum", "{\"algorithm\":\"crc32\",\"text\":\"a\\u0000b\"}", CALL_OK, "15e87871");
  call("checksum", " {\"text\" : \"123456789\" , \"algorithm\":\"all\"}\n", CALL_OK,
       "{\n  \"sha256\": \"15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225\",\n"
       "  \"sha1\": \"f7c3bc1d808e04732adf679965ccc34ca7ae3441\",\n"
       "  \"md5\": \"25f9e794323b453885f5181f1b624d0b\",\n"
       "  \"crc32\": \"cbf43926\",\n  \"adler32\": \"091e01de\",\n"
       "  \"fnv1a32\": \"bb86b11c\",\n  \"fnv1a64\": \"06d5573923c6cdfc\"\n}");

  call("checksum_verify", "{\"text\":\"123456789\",\"expected\":\"CBF43926\"}", CALL_OK,
       "{\"match\":true,\"algorithm\":\"crc32\",\"computed\":\"cbf43926\"}");
  call("checksum_verify", "{\"text\":\"123456789\",\"expected\":\"091e01de\"}", CALL_OK,
       "{\"match\":true,\"algorithm\":\"adler32\",\"computed\":\"091e01de\"}");
  call("checksum_verify", "{\"text\":\"abc\",\"expected\":\" sha1:A9993E364706816ABA3E25717850C26C9CD0D89D\\n\"}",
       CALL_OK, "{\"match\":true,\"algorithm\":\"sha1\",\"computed\":\"a9993e364706816aba3e25717850c26c9cd0d89d\"}");
  call("checksum_verify", "{\"text\":\"abd\",\"expected\":\"900150983cd24fb0d6963f7d28e17f72\"}", CALL_OK,
       "{\"match\":false,\"algorithm\":\"md5\",\"computed\":\"4911e516e5aa21d327512e0c8b197616\"}");
  call("checksum_verify", "{\"text\":\"x\",\"expected\":\"00000000\",\"algorithm\":\"fnv1a32\"}", CALL_OK,
       "{\"match\":false,\"algorithm\":\"fnv1a32\",\"computed\":\"fd0c5087\"}");

  // Bad arguments: invalid-input, naming the argument.
  call("checksum", "{\"algorithm\":\"sha256\"}", CALL_INVALID_INPUT, "give exactly one of the arguments `text`");
  call("checksum", "{\"text\":\"a\",\"data\":\"YQ\",\"algorithm\":\"sha256\"}", CALL_INVALID_INPUT, ", not both");
  call("checksum", "{\"text\":\"a\"}", CALL_INVALID_INPUT, "argument `algorithm` is required");
  call("checksum", "{\"text\":\"a\",\"algorithm\":\"sha3\"}", CALL_INVALID_INPUT,
       "argument `algorithm` must be one of sha256, sha1, md5, crc32, adler32, fnv1a32, fnv1a64, all; got \"sha3\"");
  call("checksum", "{\"text\":\"a\",\"algorithm\":\"sha256\\u0000\"}", CALL_INVALID_INPUT, "got \"sha256?\"");
  call("checksum", "{\"text\":7,\"algorithm\":\"md5\"}", CALL_INVALID_INPUT, "argument `text` must be a string, got a number");
  call("checksum", "{\"text\":\"a\",\"algorithm\":null}", CALL_INVALID_INPUT, "argument `algorithm` must be a string, got null");
  call("checksum", "{\"text\":\"a\",\"algo\":\"md5\"}", CALL_INVALID_INPUT, "unknown argument `algo`");
  call("checksum", "{\"data\":\"YW!j\",\"algorithm\":\"md5\"}", CALL_INVALID_INPUT,
       "argument `data` is not base64: unexpected character at offset 2");
  call("checksum", "{\"data\":\"YWJjZ\",\"algorithm\":\"md5\"}", CALL_INVALID_INPUT, "argument `data` is not base64");
  call("checksum", "{\"data\":\"YQ=\",\"algorithm\":\"md5\"}", CALL_INVALID_INPUT, "argument `data` is not base64");
  call("checksum", "{\"data\":\"YQ==YQ==\",\"algorithm\":\"md5\"}", CALL_INVALID_INPUT, "after '=' padding");
  call("checksum", "[1]", CALL_INVALID_INPUT, "arguments are not a valid JSON object: expected a JSON object at byte 0");
  call("checksum_verify", "{\"text\":\"a\"}", CALL_INVALID_INPUT, "argument `expected` is required");
  call("checksum_verify", "{\"text\":\"a\",\"expected\":\"xyz\"}", CALL_INVALID_INPUT,
       "argument `expected` must be a hex digest, got \"xyz\"");
  call("checksum_verify", "{\"text\":\"a\",\"expected\":\"abc\"}", CALL_INVALID_INPUT, "no supported digest's length");
  call("checksum_verify", "{\"text\":\"a\",\"expected\":\"sha9:abcd\"}", CALL_INVALID_INPUT, "unknown algorithm prefix \"sha9\"");
  call("checksum_verify", "{\"text\":\"a\",\"expected\":\"abcd1234\",\"algorithm\":\"sha256\"}", CALL_INVALID_INPUT,
       "argument `expected` has 8 hex digits; a sha256 digest has 64");
  call("checksum_verify", "{\"text\":\"a\",\"expected\":\"md5:abcd\",\"algorithm\":\"sha1\"}", CALL_INVALID_INPUT,
       "argument `algorithm` is sha1 but `expected` says md5");
  // A long bad value is cut on a character boundary: 39 'a' then 'é' would
  // straddle byte 40, so the snippet stops before it.
  call("checksum", "{\"text\":\"a\",\"algorithm\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\u00e9bbb\"}",
       CALL_INVALID_INPUT, "got \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
  call("nope", "{}", CALL_NOT_FOUND, "no tool named \"nope\"");
}

static void test_json(void) {
  json_object o;
  char err[128];
  const char *good = "{\"s\":\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\",\"n\":-12.5e1,\"z\":0,\"t\":true,\"f\":false,\"x\":null}";
  CHECK(json_parse_object(good, strlen(good), &o, err, sizeof err), "good object: %s", err);
  CHECK(o.count == 6, "count %zu", o.count);
  CHECK(strcmp(json_get(&o, "s")->str, "a\"\\/\b\f\n\r\t") == 0, "escapes");
  CHECK(json_get(&o, "n")->num == -125.0, "number");
  CHECK(json_get(&o, "t")->boolean && !json_get(&o, "f")->boolean, "bools");
  CHECK(json_get(&o, "x")->kind == JSON_NULL && !json_get(&o, "missing"), "null/missing");
  json_object_free(&o);
  CHECK(json_parse_object("{}", 2, &o, err, sizeof err) && o.count == 0, "empty object");

  bad_json("", 0, "expected a JSON object at byte 0");
  bad_json("{", 1, "expected a member name at byte 1");
  bad_json("{\"a\"", 4, "expected ':'");
  bad_json("{\"a\":", 5, "missing value");
  bad_json("{\"a\":1", 6, "expected ',' or '}'");
  bad_json("{\"a\":1,}", 8, "expected a member name");
  bad_json("{\"a\":1} x", 9, "trailing characters");
  bad_json("{\"a\":1}{}", 9, "trailing characters");
  bad_json("{\"a\":{}}", 8, "nested objects and arrays are not supported");
  bad_json("{\"a\":[1]}", 9, "nested objects and arrays are not supported");
  bad_json("{\"a\":tru}", 9, "unexpected character");
  bad_json("{\"a\":\"x", 7, "unterminated string");
  bad_json("{\"a\":\"x\\", 8, "unterminated string");
  bad_json("{\"a\":\"x\\\"}", 10, "unterminated string");
  bad_json("{\"a\":\"\\x\"}", 10, "bad escape at byte 7");
  bad_json("{\"a\":\"\\u12\"}", 12, "bad hex digit");
  bad_json("{\"a\":\"\\ud800\"}", 14, "lone high surrogate");
  bad_json("{\"a\":\"\\ud800\\u0041\"}", 20, "lone high surrogate");
  bad_json("{\"a\":\"\\udc00\"}", 14, "lone low surrogate");
  bad_json("{\"a\":\"\t\"}", 9, "control character");
  bad_json("{\"a\":\"\xff\"}", 9, "invalid UTF-8");
  bad_json("{\"a\":\"\xc0\xaf\"}", 10, "invalid UTF-8");          // overlong '/'
  bad_json("{\"a\":\"\xed\xa0\x80\"}", 11, "invalid UTF-8");      // encoded surrogate
  bad_json("{\"a\":\"\xe2\x82\"}", 10, "invalid UTF-8");          // truncated sequence
  bad_json("{\"a\":01}", 8, "expected ',' or '}'");
  bad_json("{\"a\":1.}", 8, "bad number");
  bad_json("{\"a\":1e}", 8, "bad number");
  bad_json("{\"a\":-}", 7, "bad number");
  bad_json("{\"a\":+1}", 8, "unexpected character");
  bad_json("{\"a\":1,\"a\":2}", 13, "duplicate member \"a\"");
  bad_json("{\"a\\u0000b\":1}", 14, "NUL in member name");
  bad_json("{\"a\":1\0}", 8, "expected ',' or '}'");  // an embedded NUL is just a bad byte
  char many[600] = "{";
  for (int i = 0; i <= JSON_MAX_MEMBERS; i++) sprintf(many + strlen(many), "%s\"k%d\":1", i ? "," : "", i);
  strcat(many, "}");
  bad_json(many, strlen(many), "more than 32 members");
  char digits[100] = "{\"a\":";
  memset(digits + 5, '1', 80);
  strcpy(digits + 85, "}");
  bad_json(digits, strlen(digits), "number too long");
  // Only `len` bytes are read: a valid object cut short fails.
  bad_json("{\"a\":\"b\"}", 8, "expected ',' or '}' at byte 8");
  bad_json("{\"a\":\"b\"}", 7, "unterminated string");
}

// Mutates valid argument objects at random (seeded, so reproducible) and
// checks the reader never crashes, leaks (ASan) or returns a non-UTF-8 error.
static void fuzz(void) {
  const char *seeds[] = {
      "{\"text\":\"h\\u00e9llo \\ud83d\\ude00\",\"algorithm\":\"all\"}",
      "{\"data\":\"YWJjZA==\",\"expected\":\"sha256:00ff\",\"algorithm\":\"md5\"}",
      "{\"n\":-1.5e+10,\"t\":true,\"f\":false,\"z\":null}",
  };
  const char alphabet[] = "{}[]\":,\\u0aeE+-.tfn \x80\xc3\xff\xed";
  unsigned seed = 12345;
  size_t runs = 0;
  for (int s = 0; s < 3; s++) {
    for (int iter = 0; iter < 20000; iter++) {
      char buf[256];
      size_t len = strlen(seeds[s]);
      memcpy(buf, seeds[s], len);
      int edits = 1 + iter % 4;
      for (int e = 0; e < edits; e++) {
        seed = seed * 1103515245 + 12345;
        size_t at = (seed >> 8) % len;
        seed = seed * 1103515245 + 12345;
        switch ((seed >> 8) % 3) {
          case 0: buf[at] = alphabet[(seed >> 12) % (sizeof alphabet - 1)]; break;  // replace
          case 1: len = at; break;                                                   // truncate
          case 2: if (len < sizeof buf - 1) { memmove(buf + at + 1, buf + at, len - at); len++; } break;  // dup
        }
        if (len == 0) break;
      }
      char *text = NULL;
      const char *tool = s == 1 ? "checksum_verify" : "checksum";
      checksum_call(tool, strlen(tool), buf, len, &text);
      json_object o;
      char err[128];
      if (json_parse_object(buf, len, &o, err, sizeof err)) json_object_free(&o);
      free(text);
      runs++;
    }
  }
  CHECK(runs == 60000, "fuzz runs");
}

static void dump(void) {
  uint8_t buf[300];
  for (int i = 0; i < 300; i++) buf[i] = (uint8_t)(i * 7 + 3);
  for (size_t n = 0; n <= 300; n++)
    for (const digest_algo *a = DIGEST_ALGOS; a->name; a++) {
      uint8_t raw[DIGEST_MAX];
      char hex[2 * DIGEST_MAX + 1];
      a->fn(buf, n, raw);
      digest_hex(raw, a->size, hex);
      printf("%zu %s %s\n", n, a->name, hex);
    }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--dump") == 0) { dump(); return 0; }
  test_digests();
  test_tools();
  test_json();
  fuzz();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
