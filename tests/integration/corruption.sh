#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checked reads (DESIGN invariant 7): a byte flipped on a drive makes reads of
# that chunk fail with EIO, never return wrong bytes; the other chunks still
# read; `fsck --verify` names the damaged chunk; restoring the byte heals it.
source "$(dirname "$0")/lib.sh"

head -c $((12 * MiB)) /dev/urandom >"$TMP/f.ref"
cp "$TMP/f.ref" "$MNT/f"
"$STRIPEFS" placement "$MNT/f" --json >"$TMP/f.json" || fail "placement failed"
drive=$(json 'd["chunks"][1]["replicas"][0]["path"]' <"$TMP/f.json")
offset=$(json 'd["chunks"][1]["replicas"][0]["offset"] + 12345' <"$TMP/f.json")
unmount_pool

fsck_pool  # without --verify the metadata alone is consistent
orig=$(dd if="$drive" bs=1 skip="$offset" count=1 status=none | od -An -tu1 | tr -d ' ')
flipped=$(( orig ^ 0xff ))
printf "$(printf '\\%03o' "$flipped")" | dd of="$drive" bs=1 seek="$offset" conv=notrunc status=none
ok "flipped the byte at offset $offset of $drive (chunk 1)"

if out=$("$STRIPEFS" fsck "$META" --verify 2>&1); then fail "fsck --verify passed a flipped byte: $out"; fi
[[ "$out" == *"chunk 1 of inode"*"fails its checksum"* ]] || fail "fsck --verify does not name the chunk: $out"
ok "fsck --verify reports: $(grep PROBLEM <<<"$out" | head -1)"

mount_pool
if dd if="$MNT/f" of=/dev/null bs=1M skip=4 count=4 iflag=direct status=none 2>"$TMP/err"; then
    fail "reading the damaged chunk succeeded"
fi
grep -q "Input/output error" "$TMP/err" || fail "reading the damaged chunk: expected EIO, got: $(cat "$TMP/err")"
ok "reading chunk 1 fails with EIO"
cmp <(dd if="$MNT/f" bs=1M count=4 status=none) <(head -c $((4 * MiB)) "$TMP/f.ref") || fail "chunk 0 differs"
cmp <(dd if="$MNT/f" bs=1M skip=8 count=4 status=none) <(tail -c $((4 * MiB)) "$TMP/f.ref") || fail "chunk 2 differs"
ok "chunks 0 and 2 still read back intact"
unmount_pool

printf "$(printf '\\%03o' "$orig")" | dd of="$drive" bs=1 seek="$offset" conv=notrunc status=none
"$STRIPEFS" fsck "$META" --verify >/dev/null || fail "fsck --verify after restoring the byte"
ok "fsck --verify clean after restoring the byte"
mount_pool
cmp "$MNT/f" "$TMP/f.ref" || fail "file differs after restoring the byte"
ok "the whole file reads back after restoring the byte"
