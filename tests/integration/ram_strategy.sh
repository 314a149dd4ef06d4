#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Strategy ram on a directory: its files live in the pool's RAM segment only,
# read and write like any file, and are gone at the next mount (after an
# unmount or a kill -9); everything else stays, and fsck is clean throughout.
NDRIVES=2 DRIVE_SIZE=128M RAM_SIZE=32M CHUNK_SIZE=1M
source "$(dirname "$0")/lib.sh"
need setfattr

mkdir "$MNT/fast" "$MNT/disk"
setfattr -n user.stripefs.strategy -v ram "$MNT/fast"
head -c $((5 * MiB + 123)) /dev/urandom >"$TMP/a.ref"
cp "$TMP/a.ref" "$MNT/fast/a"
cp "$TMP/a.ref" "$MNT/disk/a"
mkdir "$MNT/fast/sub"
echo "in a subdirectory" >"$MNT/fast/sub/note"
cmp "$TMP/a.ref" "$MNT/fast/a" || fail "the ram file reads back different"
ram_id=$("$STRIPEFS" df "$MNT" --json | json '[s["id"] for s in d["segments"] if s["kind"] == "ram"][0]')
segs=$("$STRIPEFS" placement "$MNT/fast/a" --json | json 'sorted({r["segment"] for c in d["chunks"] for r in c["replicas"]})')
assert_eq "$segs" "[$ram_id]" "segments of the ram file's chunks (the RAM segment only)"
segs=$("$STRIPEFS" placement "$MNT/fast/sub/note" --json | json 'sorted({r["segment"] for c in d["chunks"] for r in c["replicas"]})')
assert_eq "$segs" "[$ram_id]" "a subdirectory inherits ram"
segs=$("$STRIPEFS" placement "$MNT/disk/a" --json | json '[r["segment"] for c in d["chunks"] for r in c["replicas"] if r["segment"] == '"$ram_id"']')
assert_eq "$segs" "[]" "the other directory's chunks on the RAM segment"
ram_used=$("$STRIPEFS" df "$MNT" --json | json '[s["used"] for s in d["segments"] if s["kind"] == "ram"][0]')
(( ram_used >= 6 * MiB )) || fail "df shows $ram_used bytes used on the RAM segment"
ok "df counts the ram files on the RAM segment ($ram_used bytes used)"

# Full: 32 MiB of RAM takes no 40 MiB file; the drives are not used instead.
if head -c $((40 * MiB)) /dev/zero >"$MNT/fast/big" 2>"$TMP/err"; then fail "40 MiB fit in a 32 MiB RAM segment"; fi
grep -q "No space left" "$TMP/err" || fail "a full RAM segment: $(cat "$TMP/err")"
rm -f "$MNT/fast/big"
ok "a ram directory that fills the RAM segment gets ENOSPC"
rm "$MNT/fast/sub/note"
echo again >"$MNT/fast/sub/note"

unmount_pool
fsck_pool
mount_pool
[[ ! -e "$MNT/fast/a" && ! -e "$MNT/fast/sub/note" ]] || fail "ram files survived the remount"
[[ -d "$MNT/fast/sub" ]] || fail "the directories of a ram directory should stay"
cmp "$TMP/a.ref" "$MNT/disk/a" || fail "the file on the drives differs after remount"
ram_used=$("$STRIPEFS" df "$MNT" --json | json '[s["used"] for s in d["segments"] if s["kind"] == "ram"][0]')
(( ram_used < MiB )) || fail "the RAM segment still shows $ram_used bytes used"
ok "after a remount the ram files are gone, their directories and every other file stay"

# A kill -9 loses them the same way, and leaves nothing behind.
cp "$TMP/a.ref" "$MNT/fast/b"
kill9_daemon
fsck_pool
mount_pool
[[ ! -e "$MNT/fast/b" ]] || fail "a ram file survived kill -9 and remount"
cmp "$TMP/a.ref" "$MNT/disk/a" || fail "the file on the drives differs after kill -9"
unmount_pool
fsck_pool
ok "after kill -9 and a remount the ram file is gone and fsck is clean"

# Without a RAM segment, ram is refused with a reason.
RAM_SIZE="" META=$TMP/meta2 MNT=$TMP/mnt2
DRIVES=("$TMP/other0.img" "$TMP/other1.img")
mkfs_pool
mount_pool
mkdir "$MNT/fast"
if setfattr -n user.stripefs.strategy -v ram "$MNT/fast" 2>"$TMP/err"; then fail "ram was accepted without a RAM segment"; fi
grep -q "has none" "$META/stripefs.log" || fail "no reason logged: $(tail -3 "$META/stripefs.log")"
unmount_pool
if "$STRIPEFS" mkfs --meta "$TMP/meta3" --drive "$TMP/x.img:64M" --strategy ram 2>"$TMP/err"; then
    fail "mkfs --strategy ram was accepted"
fi
grep -q "for directories" "$TMP/err" || fail "mkfs --strategy ram: $(cat "$TMP/err")"
ok "ram without a RAM segment, or for a whole pool, is refused: $(cat "$TMP/err")"
