#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dd (big blocks, small in-place overwrites, truncating seek, O_DIRECT),
# rsync in and out, tar into and out of the mount.
source "$(dirname "$0")/lib.sh"
need dd; need cmp; need rsync; need tar; need diff

# --- dd ---------------------------------------------------------------------
head -c $((20 * MiB)) /dev/urandom >"$TMP/rand20"
head -c $((2 * MiB)) /dev/urandom >"$TMP/patch"
dd if="$TMP/rand20" of="$MNT/dd" bs=1M status=none
cp "$TMP/rand20" "$TMP/dd.ref"
cmp "$TMP/dd.ref" "$MNT/dd" || fail "20 MiB written with dd bs=1M differs"
ok "dd bs=1M of 20 MiB reads back identical"

# 300 x 4 KiB in the middle, crossing the 8 MiB chunk boundary, no truncation.
for f in "$TMP/dd.ref" "$MNT/dd"; do
    dd if="$TMP/patch" of="$f" bs=4k seek=1900 count=300 conv=notrunc status=none
done
assert_eq "$(stat -c %s "$MNT/dd")" $((20 * MiB)) "size after conv=notrunc overwrite"
cmp "$TMP/dd.ref" "$MNT/dd" || fail "dd bs=4k conv=notrunc overwrite differs from reference"
ok "dd bs=4k conv=notrunc overwrite in the middle matches reference"

# Without notrunc dd truncates at the end of what it wrote (unaligned: 4k*2500+...).
for f in "$TMP/dd.ref" "$MNT/dd"; do
    dd if="$TMP/patch" of="$f" bs=4k seek=2500 count=7 status=none
done
assert_eq "$(stat -c %s "$MNT/dd")" $(( (2500 + 7) * 4096 )) "size after truncating dd"
cmp "$TMP/dd.ref" "$MNT/dd" || fail "truncating dd differs from reference"
ok "dd with seek and no notrunc truncates like the reference"

if dd if="$TMP/rand20" of="$MNT/direct" bs=1M count=8 oflag=direct status=none 2>"$TMP/dd.err"; then
    cmp <(head -c $((8 * MiB)) "$TMP/rand20") "$MNT/direct" || fail "dd oflag=direct data differs"
    dd if="$MNT/direct" of="$TMP/direct.back" bs=1M iflag=direct status=none || fail "dd iflag=direct read failed: $?"
    cmp "$TMP/direct.back" "$MNT/direct" || fail "dd iflag=direct read back differs"
    ok "dd oflag=direct / iflag=direct work and read back identical"
elif grep -q "Invalid argument" "$TMP/dd.err"; then
    log "NOTE: the mount refuses O_DIRECT with EINVAL (accepted): $(cat "$TMP/dd.err")"
else
    fail "dd oflag=direct failed with something other than EINVAL: $(cat "$TMP/dd.err")"
fi

# --- rsync --------------------------------------------------------------------
SRC=$TMP/src
mkdir -p "$SRC/x/y" "$SRC/z"
for i in $(seq 1 30); do head -c $((RANDOM * 7 + i)) /dev/urandom >"$SRC/x/f$i"; done
head -c $((5 * MiB + 3)) /dev/urandom >"$SRC/x/y/big"
: >"$SRC/z/empty"
ln -s ../x/f1 "$SRC/z/link"
chmod 0640 "$SRC/x/f2"
rsync -a "$SRC/" "$MNT/rs/" || fail "rsync -a into the mount failed"
diff -r "$SRC" "$MNT/rs" || fail "rsync into the mount: trees differ"
ok "rsync -a into the mount: diff -r clean"
head -c 12345 /dev/urandom >>"$SRC/x/f3"      # rsync rewrites via temp file + rename
head -c 100 /dev/urandom >"$SRC/x/new"
rm "$SRC/x/f4"
rsync -a --delete "$SRC/" "$MNT/rs/" || fail "second (incremental) rsync into the mount failed"
diff -r "$SRC" "$MNT/rs" || fail "incremental rsync into the mount: trees differ"
ok "incremental rsync -a --delete into the mount: diff -r clean"
rsync -a "$MNT/rs/" "$TMP/rsout/" || fail "rsync -a out of the mount failed"
diff -r "$SRC" "$TMP/rsout" || fail "rsync out of the mount: trees differ"
assert_eq "$(stat -c %a "$TMP/rsout/x/f2")" 640 "mode kept through rsync in and out"
ok "rsync -a out of the mount: diff -r clean"

# --- tar ----------------------------------------------------------------------
tar cf "$MNT/tree.tar" -C "$SRC" . || fail "tar cf into the mount failed"
mkdir "$TMP/tarout"
tar xf "$MNT/tree.tar" -C "$TMP/tarout" || fail "tar xf from the mount failed"
diff -r "$SRC" "$TMP/tarout" || fail "tar round trip through the mount: trees differ"
ok "tar cf into the mount, tar xf from it: diff -r clean"
mkdir "$MNT/untar"
tar xf "$MNT/tree.tar" -C "$MNT/untar" || fail "tar xf inside the mount failed"
diff -r "$SRC" "$MNT/untar" || fail "tar xf inside the mount: trees differ"
ok "tar xf inside the mount: diff -r clean"

remount_pool
cmp "$TMP/dd.ref" "$MNT/dd" || fail "dd file differs after remount"
diff -r "$SRC" "$MNT/rs" || fail "rsync tree differs after remount"
diff -r "$SRC" "$MNT/untar" || fail "untarred tree differs after remount"
ok "dd file, rsync tree and untarred tree identical after remount"
