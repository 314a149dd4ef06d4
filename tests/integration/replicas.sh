#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replicas and per-directory layout: a directory with user.stripefs.replicas=2
# holds files whose every chunk has 2 replicas on distinct drives; layout
# attributes are validated and inherited; with one drive file removed the pool
# mounts with -o degraded and every 2-replica file reads back, a 1-replica file
# on the lost drive fails with EIO, and writes still work.
source "$(dirname "$0")/lib.sh"
need setfattr
need getfattr

mkdir "$MNT/safe"
setfattr -n user.stripefs.replicas -v 2 "$MNT/safe"
setfattr -n user.stripefs.chunk_size -v 1M "$MNT/safe"
mkdir "$MNT/safe/sub"
assert_eq "$(getfattr --absolute-names --only-values -n user.stripefs.replicas "$MNT/safe/sub")" 2 "replicas inherited by a new directory"
layout=$(getfattr --absolute-names --only-values -n user.stripefs.layout "$MNT/safe/sub")
assert_eq "$(json 'd["replicas"], d["chunk_size"], d["strategy"]' <<<"$layout")" "(2, 1048576, 'striped')" "effective layout of the new directory"

for bad in "user.stripefs.replicas=4" "user.stripefs.replicas=0" "user.stripefs.chunk_size=3M" "user.stripefs.strategy=nope"; do
    if setfattr -n "${bad%%=*}" -v "${bad#*=}" "$MNT/safe" 2>/dev/null; then fail "setfattr $bad was accepted"; fi
done
ok "invalid layout values are refused"
echo x >"$MNT/file"
if setfattr -n user.stripefs.replicas -v 2 "$MNT/file" 2>/dev/null; then fail "a layout attribute was set on a file"; fi
ok "layout attributes are refused on files"
if setfattr -n user.stripefs.layout -v x "$MNT/safe" 2>/dev/null; then fail "user.stripefs.layout was writable"; fi
ok "user.stripefs.layout is read-only"

for i in $(seq 1 12); do head -c $((3 * MiB + i * 4321)) /dev/urandom >"$MNT/safe/sub/f$i"; done
head -c $((9 * MiB)) /dev/urandom >"$MNT/single"   # pool default: 1 replica, 4 MiB chunks
(cd "$MNT" && sha256sum safe/sub/f* single) >"$TMP/sums"
for i in $(seq 1 12); do
    "$STRIPEFS" placement "$MNT/safe/sub/f$i" --json >"$TMP/p.json"
    assert_eq "$(json 'all(len(c["replicas"]) == 2 and len({r["segment"] for r in c["replicas"]}) == 2 for c in d["chunks"])' <"$TMP/p.json")" \
        true "f$i: every chunk has 2 replicas on distinct drives"
done
assert_eq "$(getfattr --absolute-names --only-values -n user.stripefs.layout "$MNT/single" | json 'd["replicas"]')" 1 "a file outside keeps the pool default"

# The drive holding chunk 0 of `single` is the one we lose.
lost=$("$STRIPEFS" placement "$MNT/single" --json | json 'd["chunks"][0]["replicas"][0]["segment"]')
unmount_pool
mv "${DRIVES[$lost]}" "$TMP/lost.img"
if "$STRIPEFS" mount "$META" "$MNT" 2>"$TMP/err"; then fail "mounted with drive $lost missing and no -o degraded"; fi
grep -q "drive $lost" "$TMP/err" || fail "refusal does not name drive $lost: $(cat "$TMP/err")"
ok "without -o degraded the mount is refused: $(cat "$TMP/err")"
MOUNT_OPTS=(-o degraded)
mount_pool
(cd "$MNT" && sha256sum -c --quiet <(grep safe/ "$TMP/sums")) || fail "a 2-replica file differs with drive $lost missing"
ok "all 12 two-replica files read back with drive $lost missing"
if cat "$MNT/single" >/dev/null 2>"$TMP/err"; then fail "the 1-replica file on the lost drive read without error"; fi
grep -q "Input/output error" "$TMP/err" || fail "expected EIO, got: $(cat "$TMP/err")"
ok "the 1-replica file with a chunk on the lost drive fails with EIO"

# Writes in degraded mode: a rewritten chunk moves to present drives with both replicas.
printf 'rewritten' | dd of="$MNT/safe/sub/f1" bs=1 seek=100 conv=notrunc status=none
"$STRIPEFS" placement "$MNT/safe/sub/f1" --json >"$TMP/p.json"
assert_eq "$(json "sorted({r['segment'] for r in d['chunks'][0]['replicas']} - {$lost}).__len__()" <"$TMP/p.json")" 2 \
    "the rewritten chunk has 2 replicas, none on drive $lost"
head -c $((5 * MiB)) /dev/urandom >"$TMP/new.ref"
cp "$TMP/new.ref" "$MNT/safe/sub/new"
cmp "$TMP/new.ref" "$MNT/safe/sub/new" || fail "a new file written in degraded mode differs"
ok "a new file can be written and read in degraded mode"
unmount_pool

mv "$TMP/lost.img" "${DRIVES[$lost]}"
MOUNT_OPTS=()
mount_pool
(cd "$MNT" && sha256sum -c --quiet <(grep -v 'safe/sub/f1$' "$TMP/sums")) || fail "files differ after the drive came back"
cmp "$TMP/new.ref" "$MNT/safe/sub/new" || fail "the file written in degraded mode differs after the drive came back"
ok "with the drive back, every file reads back"
unmount_pool
fsck_pool
