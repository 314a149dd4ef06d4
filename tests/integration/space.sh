#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Free means writable (DESIGN invariant 9), on drive files in /dev/shm:
#  1. small files fill the pool, a random half goes; then one large file
#     written with dd until ENOSPC takes >= 98 % of what df called free, and
#     so does a run of 2 MiB files written one after another;
#  2. 1 MiB files fill the pool, every other one in drive-offset order goes;
#     then files of 2, 4 and 8 MiB take >= 98 % of what df called free;
#  3. random create/append/truncate/delete never meets ENOSPC while df
#     shows more than 2 % free;
# and fsck calls the pool clean at the end (every extent counted once).
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need dd; need stat
[[ -d /dev/shm ]] || fail "/dev/shm is missing"
SHM=$(mktemp -d /dev/shm/stripefs-space.XXXXXX)
CLEANUP_HOOKS+=("rm -rf $SHM")
# Large enough that what a single stream cannot reach at the very end (a
# chunk's replica stays on one drive, so the last chunk cannot move to a
# drive with less room than its data) stays under 2 %: that is up to about
# one chunk (4 MiB) on each drive.
NDRIVES=4 DRIVE_SIZE=512M RAM_SIZE=
for ((i = 0; i < NDRIVES; i++)); do DRIVES+=("$SHM/drive$i.img"); done
mkfs_pool
mount_pool

df_free() { sync -f "$MNT"; stat -f -c '%a * %S' "$MNT" | xargs expr; }
df_size() { stat -f -c '%b * %S' "$MNT" | xargs expr; }
# expect_share WRITTEN FREE WHAT: WRITTEN must be at least 98 % of FREE.
expect_share() {
    python3 -c 'import sys; w, f = int(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if w >= 0.98 * f else 1)' "$1" "$2" \
        || fail "$3: wrote $1 bytes of the $2 that df called free ($(python3 -c "print(f'{$1 / $2:.4f}')"))"
    ok "$3: wrote $1 of $2 free bytes ($(python3 -c "print(f'{$1 / $2:.4f}')"))"
}
# fill_until_full DIR SIZE...: files of the sizes in turn until one fails with
# ENOSPC; prints the bytes stored (the failed file's partial bytes count: they
# are on the drives). Any other error fails the test.
fill_until_full() {
    python3 - "$@" <<'PY' || fail "filling $1 failed"
import errno, os, sys
d, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
os.makedirs(d, exist_ok=True)
block = os.urandom(1 << 20)
stored, i = 0, 0
while True:
    size = sizes[i % len(sizes)]
    path = os.path.join(d, f"f{i:06d}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            n = os.write(fd, block[: min(len(block), size - done)])
            done += n
        os.fsync(fd)
        stored += done
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        os.close(fd)
        stored += os.stat(path).st_size
        print(stored)
        sys.exit(0)
    os.close(fd)
    i += 1
PY
}

# --- 1. small files, a random half deleted --------------------------------
log "small files of 1-64 KiB until the pool is full"
python3 - "$MNT/small" <<'PY' || fail "filling with small files failed"
import errno, os, random, sys
d = sys.argv[1]
rng = random.Random(17)
data = os.urandom(64 << 10)
n = 0
while True:
    sub = os.path.join(d, f"{n // 1000:03d}")
    if n % 1000 == 0:
        os.makedirs(sub, exist_ok=True)
    try:
        with open(os.path.join(sub, f"{n:06d}"), "wb") as f:
            f.write(data[: rng.randint(1, 64) << 10])
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        break
    n += 1
print(n, file=sys.stderr)
PY
free_full=$(df_free)
python3 - "$MNT/small" <<'PY' || fail "deleting a random half failed"
import os, random, sys
rng = random.Random(18)
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        if rng.random() < 0.5:
            os.unlink(os.path.join(root, f))
PY
free=$(df_free)
ok "the pool was full ($free_full bytes free); a random half of the small files is gone: $free bytes free"

written=$(timeout 300 dd if=/dev/zero of="$MNT/large" bs=1M status=none 2>&1; stat -c %s "$MNT/large")
written=${written##*$'\n'}
"$STRIPEFS" df "$MNT"
# The daemon's log says why: the drives, what each had free, the request.
grep -E 'pool is full: chunk [0-9]+ of object .* needs [0-9]+ bytes .*drive 0: [0-9]+ bytes free, longest run [0-9]+' \
    "$META/stripefs.log" >/dev/null || fail "the log does not say why the write met ENOSPC: $(grep -i full "$META/stripefs.log" | tail -2)"
ok "the log says which drives were full, what each had free and how much the write needed"
expect_share "$written" "$free" "one large file written with dd into splintered free space"
rm "$MNT/large"
free=$(df_free)
expect_share "$(fill_until_full "$MNT/twos" $((2 * MiB)))" "$free" "2 MiB files one after another"
rm -r "$MNT/twos" "$MNT/small"

# --- 2. 1 MiB files, every other one by drive offset deleted ---------------
log "1 MiB files until the pool is full"
fill_until_full "$MNT/ones" "$MiB" >/dev/null
python3 - "$STRIPEFS" "$MNT/ones" <<'PY' || fail "deleting every other 1 MiB file by drive offset failed"
import json, os, subprocess, sys
stripefs, d = sys.argv[1], sys.argv[2]
where = []
for name in sorted(os.listdir(d)):
    path = os.path.join(d, name)
    p = json.loads(subprocess.check_output([stripefs, "placement", path, "--json"]))
    if not p["chunks"]:
        os.unlink(path)
        continue
    r = p["chunks"][0]["replicas"][0]
    where.append((r["segment"], r["extents"][0]["offset"], path))
where.sort()
for k, (_, _, path) in enumerate(where):
    if k % 2 == 0:
        os.unlink(path)
PY
free=$(df_free)
expect_share "$(fill_until_full "$MNT/mixed" $((2 * MiB)) $((4 * MiB)) $((8 * MiB)))" "$free" \
    "files of 2, 4 and 8 MiB after every other 1 MiB file (by drive offset) went"
rm -r "$MNT/ones" "$MNT/mixed"

# --- 3. random churn --------------------------------------------------------
log "random create/append/truncate/delete"
size=$(df_size)
python3 - "$MNT/churn" "$size" <<'PY' || fail "random churn met ENOSPC early"
import errno, os, random, sys
d, size = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
rng = random.Random(19)
data = os.urandom(8 << 20)
names = [os.path.join(d, f"c{i:04d}") for i in range(1000)]
full = 0
for op in range(4000):
    path = rng.choice(names)
    kind = rng.random()
    try:
        if kind < 0.4:
            with open(path, "wb") as f:
                f.write(data[: rng.randint(1, 8 << 20)])
        elif kind < 0.8:
            with open(path, "ab") as f:
                f.write(data[: rng.randint(1, 2 << 20)])
        elif kind < 0.9:
            if os.path.exists(path):
                os.truncate(path, rng.randint(0, os.path.getsize(path)))
        elif os.path.exists(path):
            os.unlink(path)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        os.sync()
        st = os.statvfs(d)
        free = st.f_bavail * st.f_frsize
        if free > 0.02 * size:
            sys.exit(f"operation {op}: ENOSPC with {free} of {size} bytes free ({free / size:.2%})")
        full += 1
        for victim in rng.sample(names, 30):  # make room and go on
            if os.path.exists(victim):
                os.unlink(victim)
print(f"4000 operations, {full} of them met a full pool", file=sys.stderr)
if full == 0:
    sys.exit("the churn never filled the pool, so it showed nothing")
PY
ok "4000 random operations: no ENOSPC while df showed more than 2 % free"
rm -r "$MNT/churn"
unmount_pool
fsck_pool
