#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cache mode (-o on_full=evict): a pool of 4 x 64 MiB drives takes 600 MiB of
# 1 MiB files with no failed write; the oldest files are evicted, the newest
# are there, a pinned file stays; fsck is clean afterwards.
NDRIVES=4 DRIVE_SIZE=64M CHUNK_SIZE=1M MOUNT_OPTS=(-o on_full=evict)
source "$(dirname "$0")/lib.sh"
need setfattr

head -c $((MiB)) /dev/urandom >"$TMP/pinned.ref"
cp "$TMP/pinned.ref" "$MNT/pinned"
setfattr -n user.stripefs.pin -v 1 "$MNT/pinned"
mkdir "$MNT/d"
for i in $(seq -w 1 600); do
    head -c $((MiB)) /dev/urandom >"$TMP/f"
    cp "$TMP/f" "$MNT/d/f$i" 2>"$TMP/err" || fail "writing file $i of 600 failed: $(cat "$TMP/err")"
    if ((10#$i % 100 == 0)); then
        used=$(used_bytes); log "after $i files: $((used / MiB)) MiB of the drives in use"
    fi
    [[ 10#$i -ge 595 ]] && cp "$TMP/f" "$TMP/last$i"
done
ok "600 x 1 MiB written into 256 MiB of drives, no write failed"
left=$(ls "$MNT/d" | wc -l)
(( left > 50 && left < 256 )) || fail "$left files left (expected the drives' worth)"
for i in 001 002 003 100; do [[ ! -e "$MNT/d/f$i" ]] || fail "old file f$i is still there"; done
ok "the oldest files are gone ($left of 600 left)"
for i in 595 596 597 598 599 600; do cmp "$TMP/last$i" "$MNT/d/f$i" || fail "newest file f$i differs"; done
ok "the 6 newest files are there and intact"
cmp "$TMP/pinned.ref" "$MNT/pinned" || fail "the pinned file differs"
ok "the pinned file, the oldest of all, is intact"
oldest_left=$(ls "$MNT/d" | head -1)
newest_gone=$(comm -23 <(seq -f 'f%03g' 1 600) <(ls "$MNT/d") | tail -1)
[[ "$newest_gone" < "$oldest_left" ]] || fail "eviction was not oldest first: $newest_gone gone while $oldest_left stays"
ok "evicted oldest first: everything up to $newest_gone gone, from $oldest_left on present"
evicted=$("$STRIPEFS" stats "$MNT" --json | json 'd["eviction"]["objects"]')
assert_eq "$evicted" "$((600 - left))" "files evicted, as stripefs stats counts them"
unmount_pool
fsck_pool
MOUNT_OPTS=()
mount_pool
cmp "$TMP/last600" "$MNT/d/f600" || fail "f600 differs after remount"
assert_eq "$(ls "$MNT/d" | wc -l)" "$left" "files after remount"
unmount_pool

# With no background eviction (evict_high=100), writes themselves find the
# pool full: each such write evicts and then succeeds.
MOUNT_OPTS=(-o on_full=evict,evict_high=100,evict_low=98)
mount_pool
for i in $(seq 601 700); do
    head -c $((MiB)) /dev/urandom >"$TMP/f"
    cp "$TMP/f" "$MNT/d/f$i" 2>"$TMP/err" || fail "writing file $i failed: $(cat "$TMP/err")"
done
cmp "$TMP/f" "$MNT/d/f700" || fail "f700 differs"
cmp "$TMP/pinned.ref" "$MNT/pinned" || fail "the pinned file differs"
unmount_pool  # (the log is complete once the daemon has exited)
grep -q "cache mode: a write found the pool full" "$META/stripefs.log" || fail "no write made room itself"
ok "100 more files with evict_high=100: every write that found the pool full made room and succeeded"
fsck_pool
if "$STRIPEFS" mount "$META" "$MNT" -o on_full=evict,evict_high=50,evict_low=60 2>"$TMP/err"; then fail "low above high was accepted"; fi
grep -q "evict_low must be below evict_high" "$TMP/err" || fail "message: $(cat "$TMP/err")"
if "$STRIPEFS" mount "$META" "$MNT" -o on_full=evict,evict_high=101 2>"$TMP/err"; then fail "evict_high=101 was accepted"; fi
grep -q "from 1 to 100" "$TMP/err" || fail "message: $(cat "$TMP/err")"
if "$STRIPEFS" mount "$META" "$MNT" -o on_full=maybe 2>"$TMP/err"; then fail "on_full=maybe was accepted"; fi
ok "bad cache-mode options are refused: $(cat "$TMP/err")"
