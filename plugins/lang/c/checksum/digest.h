// Message digests and checksums in plain C, one-shot over a byte buffer.
// No external libraries: the same code runs natively (tests) and in wasm.
#ifndef CHECKSUM_DIGEST_H
#define CHECKSUM_DIGEST_H

#include <stddef.h>
#include <stdint.h>

// The longest digest below, in bytes (SHA-256).
#define DIGEST_MAX 32

typedef struct {
  const char *name;  // as the `algorithm` argument spells it
  size_t size;       // digest size in bytes
  void (*fn)(const uint8_t *data, size_t len, uint8_t *out);
} digest_algo;

// Every algorithm, strongest first; ends with a {NULL} entry.
extern const digest_algo DIGEST_ALGOS[];

// The algorithm called `name` (`len` bytes, not NUL-terminated), or NULL.
const digest_algo *digest_find(const char *name, size_t len);

void digest_md5(const uint8_t *data, size_t len, uint8_t out[16]);
void digest_sha1(const uint8_t *data, size_t len, uint8_t out[20]);
void digest_sha256(const uint8_t *data, size_t len, uint8_t out[32]);
// The 32-bit checksums are written big-endian, so their hex reads as the
// usual number (crc32 of "123456789" is cbf43926).
void digest_crc32(const uint8_t *data, size_t len, uint8_t out[4]);
void digest_adler32(const uint8_t *data, size_t len, uint8_t out[4]);
void digest_fnv1a32(const uint8_t *data, size_t len, uint8_t out[4]);
void digest_fnv1a64(const uint8_t *data, size_t len, uint8_t out[8]);

// Lowercase hex of `len` bytes into `out` (2 * len + 1 bytes, NUL-terminated).
void digest_hex(const uint8_t *bytes, size_t len, char *out);

#endif
