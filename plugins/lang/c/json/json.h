// A minimal, strict reader for flat JSON objects: the `arguments` of a tool
// call, whose members are strings, numbers, booleans or null. Nested objects
// and arrays are refused. Built for hostile input: it reads exactly `len`
// bytes (no NUL terminator needed), never recurses, bounds the member count,
// and rejects anything RFC 8259 rejects (bad escapes, lone surrogates,
// control characters, invalid UTF-8, trailing bytes, duplicate keys).
#ifndef WASMCLAW_JSON_H
#define WASMCLAW_JSON_H

#include <stdbool.h>
#include <stddef.h>

// More members than this is an error: a tool has a handful of arguments.
#define JSON_MAX_MEMBERS 32

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING } json_kind;

typedef struct {
  char *key;        // unescaped, NUL-terminated (a key holding \u0000 is refused)
  json_kind kind;
  char *str;        // JSON_STRING: unescaped UTF-8, NUL-terminated, may hold NULs
  size_t str_len;   //   its length in bytes
  double num;       // JSON_NUMBER
  bool boolean;     // JSON_BOOL
} json_member;

typedef struct {
  json_member members[JSON_MAX_MEMBERS];
  size_t count;
} json_object;

// Parses `src[0..len)` as one JSON object into `out`. Returns true on
// success; on failure returns false, frees what it allocated and writes a
// one-line reason (with the byte offset) into `err`.
bool json_parse_object(const char *src, size_t len, json_object *out, char *err, size_t err_size);

// The member called `key`, or NULL.
const json_member *json_get(const json_object *o, const char *key);

// A name for the kind, for error messages: "a string", "a number", ...
const char *json_kind_name(json_kind kind);

void json_object_free(json_object *o);

#endif
