// Message digests and checksums: see digest.h. Each function follows its
// specification (RFC 1321 MD5, FIPS 180-4 SHA-1 and SHA-256, ISO-HDLC
// CRC-32, RFC 1950 Adler-32, FNV-1a) with the padding done on a local
// final block, so no input is copied.
#include "digest.h"

#include <string.h>

static uint32_t rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }
static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t load_le32(const uint8_t *p) {
  return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static void store_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

// The three block hashes share one driver: whole 64-byte blocks straight
// from the input, then one or two padded final blocks (0x80, zeros, and the
// message length in bits, big- or little-endian).
typedef void (*block_fn)(uint32_t *state, const uint8_t block[64]);

static void md_hash(const uint8_t *data, size_t len, uint32_t *state, block_fn block,
                    int big_endian_length) {
  size_t full = len - len % 64;
  for (size_t i = 0; i < full; i += 64) block(state, data + i);

  uint8_t tail[128] = {0};
  size_t rest = len - full;
  if (rest) memcpy(tail, data + full, rest);
  tail[rest] = 0x80;
  size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++) {
    uint8_t byte = (uint8_t)(bits >> (8 * i));
    if (big_endian_length) tail[tail_len - 1 - i] = byte;
    else tail[tail_len - 8 + i] = byte;
  }
  for (size_t i = 0; i < tail_len; i += 64) block(state, tail + i);
}

// ---- MD5 (RFC 1321) ----
static void md5_block(uint32_t *s, const uint8_t *p) {
  static const uint32_t K[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
      0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
      0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
      0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
      0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
      0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
      0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
      0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
  static const uint8_t R[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
  uint32_t m[16];
  for (int i = 0; i < 16; i++) m[i] = load_le32(p + 4 * i);
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3];
  for (int i = 0; i < 64; i++) {
    uint32_t f;
    int g, round = i / 16;
    if (round == 0) { f = (b & c) | (~b & d); g = i; }
    else if (round == 1) { f = (d & b) | (~d & c); g = (5 * i + 1) % 16; }
    else if (round == 2) { f = b ^ c ^ d; g = (3 * i + 5) % 16; }
    else { f = c ^ (b | ~d); g = (7 * i) % 16; }
    uint32_t t = d;
    d = c;
    c = b;
    b = b + rotl(a + f + K[i] + m[g], R[round * 4 + i % 4]);
    a = t;
  }
  s[0] += a; s[1] += b; s[2] += c; s[3] += d;
}

void digest_md5(const uint8_t *data, size_t len, uint8_t out[16]) {
  uint32_t s[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  md_hash(data, len, s, md5_block, 0);
  for (int i = 0; i < 4; i++) store_le32(out + 4 * i, s[i]);
}

// ---- SHA-1 (FIPS 180-4) ----
static void sha1_block(uint32_t *s, const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++) w[i] = load_be32(p + 4 * i);
  for (int i = 16; i < 80; i++) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) { f = (b & c) | (~b & d); k = 0x5a827999; }
    else if (i < 40) { f = b ^ c ^ d; k = 0x6ed9eba1; }
    else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc; }
    else { f = b ^ c ^ d; k = 0xca62c1d6; }
    uint32_t t = rotl(a, 5) + f + e + k + w[i];
    e = d; d = c; c = rotl(b, 30); b = a; a = t;
  }
  s[0] += a; s[1] += b; s[2] += c; s[3] += d; s[4] += e;
}

void digest_sha1(const uint8_t *data, size_t len, uint8_t out[20]) {
  uint32_t s[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  md_hash(data, len, s, sha1_block, 1);
  for (int i = 0; i < 5; i++) store_be32(out + 4 * i, s[i]);
}

// ---- SHA-256 (FIPS 180-4) ----
static void sha256_block(uint32_t *s, const uint8_t *p) {
  static const uint32_t K[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t w[64];
  for (int i = 0; i < 16; i++) w[i] = load_be32(p + 4 * i);
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  s[0] += a; s[1] += b; s[2] += c; s[3] += d; s[4] += e; s[5] += f; s[6] += g; s[7] += h;
}

void digest_sha256(const uint8_t *data, size_t len, uint8_t out[32]) {
  uint32_t s[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  md_hash(data, len, s, sha256_block, 1);
  for (int i = 0; i < 8; i++) store_be32(out + 4 * i, s[i]);
}

// ---- CRC-32 (the zlib/PNG/Ethernet one), bitwise: small and fast enough ----
void digest_crc32(const uint8_t *data, size_t len, uint8_t out[4]) {
  uint32_t crc = 0xffffffff;
  for (size_t i = 0; i < len; i++) {
    crc ^= data[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xedb88320 & (0u - (crc & 1)));
  }
  store_be32(out, ~crc);
}

// ---- Adler-32 (RFC 1950) ----
void digest_adler32(const uint8_t *data, size_t len, uint8_t out[4]) {
  uint32_t a = 1, b = 0;
  while (len) {
    // 5552 bytes is the most that cannot overflow b before the modulo.
    size_t n = len < 5552 ? len : 5552;
    len -= n;
    while (n--) { a += *data++; b += a; }
    a %= 65521;
    b %= 65521;
  }
  store_be32(out, b << 16 | a);
}

// ---- FNV-1a, 32 and 64 bits ----
void digest_fnv1a32(const uint8_t *data, size_t len, uint8_t out[4]) {
  uint32_t h = 0x811c9dc5;
  for (size_t i = 0; i < len; i++) h = (h ^ data[i]) * 0x01000193;
  store_be32(out, h);
}

void digest_fnv1a64(const uint8_t *data, size_t len, uint8_t out[8]) {
  uint64_t h = 0xcbf29ce484222325;
  for (size_t i = 0; i < len; i++) h = (h ^ data[i]) * 0x100000001b3;
  store_be32(out, (uint32_t)(h >> 32));
  store_be32(out + 4, (uint32_t)h);
}

const digest_algo DIGEST_ALGOS[] = {
    {"sha256", 32, digest_sha256},
    {"sha1", 20, digest_sha1},
    {"md5", 16, digest_md5},
    {"crc32", 4, digest_crc32},
    {"adler32", 4, digest_adler32},
    {"fnv1a32", 4, digest_fnv1a32},
    {"fnv1a64", 8, digest_fnv1a64},
    {0},
};

const digest_algo *digest_find(const char *name, size_t len) {
  for (const digest_algo *a = DIGEST_ALGOS; a->name; a++)
    if (strlen(a->name) == len && memcmp(a->name, name, len) == 0) return a;
  return NULL;
}

void digest_hex(const uint8_t *bytes, size_t len, char *out) {
  static const char HEX[] = "0123456789abcdef";
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = HEX[bytes[i] >> 4];
    out[2 * i + 1] = HEX[bytes[i] & 15];
  }
  out[2 * len] = '\0';
}
