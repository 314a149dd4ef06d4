#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stripefs add-drive MOUNTPOINT: a nearly full, mounted 2-drive pool gets a
# third drive without a remount. New chunks land on it at once, df lists it,
# a reader of an old file running across the add never fails, refusals are
# clear and change nothing; after unmount fsck is clean and a remount reads
# everything.
NDRIVES=2 DRIVE_SIZE=32M CHUNK_SIZE=1M
source "$(dirname "$0")/lib.sh"
need dd; need cmp

head -c $((50 * MiB)) /dev/urandom >"$TMP/old.ref"
cp "$TMP/old.ref" "$MNT/old"
if head -c $((20 * MiB)) /dev/urandom >"$MNT/more" 2>/dev/null; then fail "the 2 x 32M pool took 70 MiB"; fi
rm -f "$MNT/more"
segments_before=$("$STRIPEFS" df "$MNT" --json | json 'len(d["segments"])')

# A reader of the old file, through O_DIRECT so every pass reaches the daemon
# (the page cache would answer otherwise). It counts its passes; any failed
# or differing read is recorded and stops it.
reader() {
    local n=0
    while [[ ! -e "$TMP/stop" ]]; do
        if ! cmp -s "$TMP/old.ref" <(dd if="$MNT/old" bs=1M iflag=direct status=none); then
            echo "pass $n: the old file read wrong or failed" >"$TMP/reader.failed"
            return 1
        fi
        n=$((n + 1))
        echo "$n" >"$TMP/reader.passes"
    done
}
passes() { cat "$TMP/reader.passes" 2>/dev/null || echo 0; }
# passes_at_least N: true once the reader made N passes; fails the test if it failed.
passes_at_least() {
    [[ ! -e "$TMP/reader.failed" ]] || fail "$(cat "$TMP/reader.failed")"
    (( $(passes) >= $1 ))
}
reader &
reader_pid=$!
wait_until "the reader's first pass" passes_at_least 1

# Online: the drive is added while the reader runs.
out=$("$STRIPEFS" add-drive "$MNT" "$TMP/new.img:64M") || fail "add-drive on the mountpoint failed"
ok "$out"
grep -q "new chunks use it now" <<<"$out" || fail "add-drive online does not say the drive is in use: $out"
id=$(sed -n 's/.* as drive \([0-9]*\);.*/\1/p' <<<"$out")
[[ -n "$id" ]] || fail "no drive id in: $out"
after_add=$(passes)

# df lists the new drive at once, empty.
df_json=$("$STRIPEFS" df "$MNT" --json)
assert_eq "$(json "[s['path'] for s in d['segments'] if s['id'] == $id][0]" <<<"$df_json")" "$TMP/new.img" \
    "df lists the new drive right after add-drive"
assert_eq "$(json "[s['used'] for s in d['segments'] if s['id'] == $id][0]" <<<"$df_json")" 0 "the new drive is empty"
assert_eq "$(json "[s['capacity'] for s in d['segments'] if s['id'] == $id][0]" <<<"$df_json")" $((63 * MiB)) \
    "the new drive's capacity (64M less the superblock area)"

# Refusals online: clear messages, non-zero exit, nothing changes.
refuse() {  # refuse PATTERN ARGS...: add-drive ARGS must fail saying PATTERN
    local pattern=$1; shift
    if "$STRIPEFS" add-drive "$@" >"$TMP/out" 2>"$TMP/err"; then fail "add-drive $* succeeded: $(cat "$TMP/out")"; fi
    grep -q "$pattern" "$TMP/err" || fail "add-drive $*: expected '$pattern', got: $(cat "$TMP/err")"
    ok "add-drive $* refused: $(cat "$TMP/err")"
}
refuse "is drive $id of this pool already" "$MNT" "$TMP/new.img"
refuse "is drive 0 of this pool already" "$MNT" "${DRIVES[0]}"
refuse "too small" "$MNT" "$TMP/tiny.img:1M"
refuse "does not exist" "$MNT" "$TMP/absent.img"
refuse "inside the pool's own mount" "$MNT" "$MNT/nested.img:64M"
[[ ! -e "$MNT/nested.img" ]] || fail "a refused drive inside the mount was created"
refuse "neither a stripefs mountpoint nor" "$TMP" "$TMP/other.img:64M"
# The metadata directory of a mounted pool is still refused: that form is offline only.
refuse "unmount it" "$META" "$TMP/other.img:64M"
[[ ! -e "$TMP/other.img" ]] || fail "a refused add-drive created its drive file"
# Another pool's drive is refused without --force.
"$STRIPEFS" mkfs --meta "$TMP/meta2" --drive "$TMP/foreign.img:32M" >/dev/null || fail "mkfs of a second pool failed"
refuse "already holds a stripefs pool" "$MNT" "$TMP/foreign.img"
assert_eq "$("$STRIPEFS" df "$MNT" --json | json 'len(d["segments"])')" $((segments_before + 1)) \
    "the refusals added no segment"

# Without a remount: 40 MiB more fits, mostly on the new drive.
writes_land_on_new_drive "$id" " online, without a remount"
(( $("$STRIPEFS" df "$MNT" --json | json "[s['used'] for s in d['segments'] if s['id'] == $id][0]") >= 26 * MiB )) \
    || fail "df does not count the new drive's chunks"

# The reader went on across the add and the writes, and never failed.
wait_until "two more reader passes after the add" passes_at_least $((after_add + 2))
touch "$TMP/stop"
wait "$reader_pid" || fail "$(cat "$TMP/reader.failed" 2>/dev/null || echo "the reader failed")"
[[ ! -e "$TMP/reader.failed" ]] || fail "$(cat "$TMP/reader.failed")"
ok "a reader of the old file ran $(passes) passes across the add-drive and the writes, all equal"

unmount_pool
fsck_pool
mount_pool
cmp "$TMP/old.ref" "$MNT/old" || fail "the old file differs after a remount"
cmp "$TMP/new.ref" "$MNT/new" || fail "the new file differs after a remount"
ok "a remount reads both files"

# refused_on_mount OPTION WHY: a mount with -o OPTION refuses an online add, saying WHY, and creates no drive file.
refused_on_mount() {
    MOUNT_OPTS=(-o "$1")
    mount_pool
    MOUNT_OPTS=()
    refuse "$2" "$MNT" "$TMP/other.img:64M"
    [[ ! -e "$TMP/other.img" ]] || fail "a mount with -o $1 created the refused drive"
    unmount_pool
}
# A degraded mount refuses an online add: the missing drive comes first.
unmount_pool
mv "${DRIVES[0]}" "$TMP/away.img"
refused_on_mount degraded "degraded"
mv "$TMP/away.img" "${DRIVES[0]}"
# A read-only mount: the kernel refuses the setxattr, the CLI says why.
refused_on_mount ro "the mount is read-only"
fsck_pool
