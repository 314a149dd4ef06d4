#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A pool made by stripefs 0.1.0 (tests/fixtures/pool-0.1.0.tar.gz, made by
# tests/fixtures/make_pool_0.1.0.sh) mounts under this build and reads back
# byte for byte: after the mount, after new writes (which store records in
# today's formats beside the old ones), and after a remount; fsck --verify
# calls it clean before and after.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need sha256sum; need getfattr

# The pool's config names its drives under /tmp/stripefs-fixture/pool-0.1.0
# (see make_pool_0.1.0.sh): a link from there to the unpacked copy.
FIXTURE_DIR=/tmp/stripefs-fixture
[[ ! -e "$FIXTURE_DIR" ]] || fail "$FIXTURE_DIR exists already; remove it (a stale run of this test or of make_pool_0.1.0.sh)"
mkdir -p "$TMP/unpacked"
tar -C "$TMP/unpacked" -xzf "$(dirname "$0")/../fixtures/pool-0.1.0.tar.gz"
ln -s "$TMP/unpacked" "$FIXTURE_DIR"
CLEANUP_HOOKS+=("rm -f $FIXTURE_DIR")
POOL=$FIXTURE_DIR/pool-0.1.0
META=$POOL/meta

"$STRIPEFS" fsck "$META" --verify >/dev/null || fail "fsck --verify of the 0.1.0 pool failed before the mount"
ok "fsck --verify: the 0.1.0 pool is clean under this build"

check_manifest() {  # check_manifest WHEN
    (cd "$MNT" && sha256sum --quiet -c "$TMP/manifest") || fail "files differ from what 0.1.0 wrote ($1)"
    ok "every file of the 0.1.0 pool reads back byte for byte ($1)"
}
cp "$POOL/manifest.sha256" "$TMP/manifest"
mount_pool
check_manifest "after the mount"
[[ "$(readlink "$MNT/dir/link")" == ../big.bin ]] || fail "the symlink lost its target"
[[ "$(getfattr --absolute-names --only-values -n user.comment "$MNT/small.txt")" == "written by 0.1.0" ]] || fail "the xattr is gone"
[[ "$(stat -c %h "$MNT/small.txt")" == 2 ]] || fail "the hard link count changed"
ok "symlink, xattr and hard link are as 0.1.0 left them"
"$STRIPEFS" placement "$MNT/two/mirrored.bin" --json \
    | json 'all(len(c["replicas"]) == 2 and all(len(r["extents"]) == 1 for r in c["replicas"]) for c in d["chunks"])' \
    | grep -qx true || fail "placement of a 0.1.0 file does not show two replicas of one extent each"
ok "placement lists each 0.1.0 replica as one extent"

# New writes: an overwrite inside an old chunk, an append to an old file, a new file.
head -c 20000 /dev/urandom >"$TMP/patch"
dd if="$TMP/patch" of="$MNT/big.bin" bs=4096 seek=100 conv=notrunc status=none
head -c 777777 /dev/urandom >>"$MNT/two/mirrored.bin"
head -c 3000000 /dev/urandom >"$MNT/new.bin"
(cd "$MNT" && sha256sum ./big.bin ./two/mirrored.bin ./new.bin) >"$TMP/changed"
grep -v -e ' ./big.bin$' -e ' ./two/mirrored.bin$' "$TMP/manifest" >"$TMP/kept"
cat "$TMP/kept" "$TMP/changed" >"$TMP/manifest"
check_manifest "after new writes"
remount_pool
check_manifest "after a remount"
unmount_pool
"$STRIPEFS" fsck "$META" --verify >/dev/null || fail "fsck --verify failed after the new writes"
ok "fsck --verify is clean with old and new records side by side"
mount_pool
check_manifest "after a second remount"
