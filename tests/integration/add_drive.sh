#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stripefs add-drive: a full 2-drive pool gets a third drive; after the next
# mount new chunks land on it, the old data is intact, df and fsck agree.
NDRIVES=2 DRIVE_SIZE=32M CHUNK_SIZE=1M
source "$(dirname "$0")/lib.sh"

head -c $((50 * MiB)) /dev/urandom >"$TMP/old.ref"
cp "$TMP/old.ref" "$MNT/old"
if head -c $((20 * MiB)) /dev/urandom >"$MNT/more" 2>/dev/null; then fail "the 2 x 32M pool took 70 MiB"; fi
rm -f "$MNT/more"
if "$STRIPEFS" add-drive "$META" "$TMP/new.img:64M" 2>"$TMP/err"; then fail "add-drive of a mounted pool succeeded"; fi
grep -q "unmount it" "$TMP/err" || fail "add-drive while mounted: $(cat "$TMP/err")"
unmount_pool

if "$STRIPEFS" add-drive "$META" "${DRIVES[1]}" 2>"$TMP/err"; then fail "a drive of the pool was added again"; fi
grep -q "is drive 1 of this pool already" "$TMP/err" || fail "re-adding drive 1: $(cat "$TMP/err")"
if "$STRIPEFS" add-drive "$META" "$TMP/tiny.img:1M" 2>"$TMP/err"; then fail "a 1M drive was added"; fi
grep -q "too small" "$TMP/err" || fail "tiny drive: $(cat "$TMP/err")"
out=$("$STRIPEFS" add-drive "$META" "$TMP/new.img:64M") || fail "add-drive failed"
ok "$out"
id=$(sed -n 's/.* as drive \([0-9]*\);.*/\1/p' <<<"$out")
DRIVES+=("$TMP/new.img")
fsck_pool
mount_pool
cmp "$TMP/old.ref" "$MNT/old" || fail "the old file differs after add-drive"
writes_land_on_new_drive "$id"
assert_eq "$("$STRIPEFS" df "$MNT" --json | json "[s['path'] for s in d['segments'] if s['id'] == $id][0]")" "$TMP/new.img" \
    "df lists the new drive"
unmount_pool
fsck_pool
