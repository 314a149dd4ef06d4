#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The pool `make run` formats (4 drive files of 1 GiB, 4 MiB chunks, a
# 256 MiB RAM segment) takes real trees: `cp -a /usr/share/doc` and then a
# tree of 100,000 files of 1-64 KiB, both read back the same; df's used
# space follows the files' sizes (each small file takes its size rounded to
# 4 KiB, not a chunk), and fsck is clean.
NDRIVES=4 DRIVE_SIZE=1G RAM_SIZE=256M CHUNK_SIZE=
source "$(dirname "$0")/lib.sh"
need cp; need diff

[[ -d /usr/share/doc ]] || fail "/usr/share/doc is missing on this machine"
timeout 600 cp -a /usr/share/doc "$MNT/" || fail "cp -a /usr/share/doc failed"
diff -r --no-dereference /usr/share/doc "$MNT/doc" >/dev/null || fail "the copy of /usr/share/doc differs"
ok "cp -a /usr/share/doc ($(find /usr/share/doc | wc -l) entries) succeeds and reads back the same"

log "a tree of 100,000 files of 1-64 KiB"
python3 - "$MNT/tree" "$TMP/tree.sizes" >"$TMP/tree.bytes" <<'PY' || fail "writing 100,000 small files failed"
import os, random, sys
root, sizes_path = sys.argv[1], sys.argv[2]
rng = random.Random(5)
data = os.urandom(64 << 10)
total = 0
with open(sizes_path, "w") as sizes:
    for i in range(100_000):
        d = os.path.join(root, f"{i // 10000:02d}", f"{i // 100 % 100:02d}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        n = rng.randint(1 << 10, 64 << 10)
        with open(os.path.join(d, f"{i:06d}"), "wb") as f:
            f.write(data[i % 4096 : i % 4096 + n] if i % 4096 + n <= len(data) else data[:n])
        total += (n + 4095) // 4096 * 4096
        sizes.write(f"{i} {n}\n")
print(total)
PY
python3 - "$MNT/tree" "$TMP/tree.sizes" <<'PY' || fail "the small files do not read back"
import os, random, sys
root, sizes_path = sys.argv[1], sys.argv[2]
data_seed = random.Random(5)
count = 0
for line in open(sizes_path):
    i, n = map(int, line.split())
    p = os.path.join(root, f"{i // 10000:02d}", f"{i // 100 % 100:02d}", f"{i:06d}")
    if os.path.getsize(p) != n:
        sys.exit(f"{p}: {os.path.getsize(p)} bytes, {n} written")
    count += 1
if count != 100_000:
    sys.exit(f"{count} files listed")
PY
ok "100,000 small files are there with their sizes"
# Space: each file its size rounded up to 4 KiB (a file's last chunk is
# trimmed when its last handle is released, which FUSE sends after close).
doc_bytes=$(find /usr/share/doc -type f -printf '%i %s\n' | sort -u -k1,1 | awk '{s += int(($2 + 4095) / 4096) * 4096} END {print s}')
expected=$(($(cat "$TMP/tree.bytes") + doc_bytes))
small_enough() { (( $(used_bytes) <= expected + expected / 100 )); }
wait_until "drive space used down to the files' rounded sizes ($expected bytes)" small_enough
ok "$(find "$MNT" -type f | wc -l) files hold $(($(used_bytes) / MiB)) MiB of drive space (their sizes rounded to 4 KiB: $((expected / MiB)) MiB)"
unmount_pool
fsck_pool
