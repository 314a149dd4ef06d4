#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Drives can be block devices: a pool over loop devices (sized from the
# device), used through the mount and checked with fsck --verify.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need losetup

LOOPS=()
detach_loops() { local l; for l in "${LOOPS[@]}"; do losetup -d "$l"; done; }
CLEANUP_HOOKS+=(detach_loops)
for i in 0 1; do
    truncate -s 64M "$TMP/backing$i"
    loop=$(losetup --find --show "$TMP/backing$i") || fail "losetup failed"
    LOOPS+=("$loop")
done

DRIVES=("${LOOPS[@]}")
"$STRIPEFS" mkfs --meta "$META" --drive "${LOOPS[0]}" --drive "${LOOPS[1]}" >"$TMP/mkfs.out" 2>&1 \
    || fail "mkfs on loop devices: $(cat "$TMP/mkfs.out")"
grep -q "${LOOPS[0]}" "$TMP/mkfs.out" || fail "mkfs output does not name ${LOOPS[0]}"
ok "mkfs on ${LOOPS[*]}"
if "$STRIPEFS" mkfs --meta "$TMP/meta2" --drive "${LOOPS[0]}:1G" --force >/dev/null 2>&1; then
    fail "mkfs accepted a size larger than the block device"
fi
ok "a size larger than the device is refused"
mount_pool
head -c $((20 * MiB)) /dev/urandom >"$TMP/f.ref"
cp "$TMP/f.ref" "$MNT/f"
unmount_pool
"$STRIPEFS" fsck "$META" --verify >/dev/null || fail "fsck --verify on loop devices"
mount_pool
cmp "$MNT/f" "$TMP/f.ref" || fail "file on loop devices differs"
ok "20 MiB file reads back from loop-device drives"
