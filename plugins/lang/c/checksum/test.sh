#!/usr/bin/env bash
# Native tests of the checksum plugin's C code with the host's compiler,
# under AddressSanitizer and UBSan; the digests of 0..300 bytes are also
# compared with Python's hashlib and zlib. Builds into target/, not here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
out="$root/target/guests/lang/src/checksum-test"
mkdir -p "$out"
cc="${CC:-cc}"
"$cc" -std=c11 -I "$here/../json" -Wall -Wextra -Werror -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
  -o "$out/test_checksum" "$here"/test_checksum.c "$here"/checksum.c "$here"/digest.c "$here"/../json/json.c
"$out/test_checksum" --dump >"$out/dump.txt"
python3 - "$out/dump.txt" <<'PY'
import hashlib, sys, zlib
data = bytes((i * 7 + 3) & 255 for i in range(300))
def fnv(d, bits):
    h, p, m = (0x811c9dc5, 0x01000193, 2**32) if bits == 32 else (0xcbf29ce484222325, 0x100000001b3, 2**64)
    for b in d:
        h = ((h ^ b) * p) % m
    return format(h, "0%dx" % (bits // 4))
want = {
    "sha256": lambda d: hashlib.sha256(d).hexdigest(),
    "sha1": lambda d: hashlib.sha1(d).hexdigest(),
    "md5": lambda d: hashlib.md5(d).hexdigest(),
    "crc32": lambda d: format(zlib.crc32(d), "08x"),
    "adler32": lambda d: format(zlib.adler32(d), "08x"),
    "fnv1a32": lambda d: fnv(d, 32),
    "fnv1a64": lambda d: fnv(d, 64),
}
bad = 0
lines = open(sys.argv[1]).read().split("\n")[:-1]
for line in lines:
    n, algo, hexd = line.split()
    if want[algo](data[: int(n)]) != hexd:
        bad += 1
        print("MISMATCH", line)
assert len(lines) == 301 * len(want), len(lines)
print(f"digests of 0..300 bytes agree with hashlib/zlib: {len(lines) - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
PY
"$out/test_checksum"
