#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Operating a pool as a user would: the CLI's exit codes (0 ok, 1 failure,
# 2 usage), the mount's source, a refused mount over a non-empty directory,
# clear messages on a dead mount, `stripefs df` on a degraded mount,
# df(1) on a pool with 2 replicas, and `stripefs layout` with the reason for a
# refused value.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need findmnt

# rc_of CMD...: CMD's exit status, its stderr kept in $TMP/err
rc_of() { local rc=0; "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?; echo "$rc"; }

log "--- exit codes"
assert_eq "$(rc_of "$STRIPEFS" no-such-command)" 2 "an unknown command"
grep -q '^stripefs: ' "$TMP/err" || fail "usage error without the stripefs: prefix: $(cat "$TMP/err")"
grep -q -- "--help" "$TMP/err" || fail "usage error does not point at --help: $(cat "$TMP/err")"
assert_eq "$(rc_of "$STRIPEFS" mkfs)" 2 "mkfs without its required options"
assert_eq "$(rc_of "$STRIPEFS" mkfs --meta "$TMP/m" --drive "$TMP/d:1M" --replicas 9)" 2 "an out-of-range option value"
assert_eq "$(rc_of "$STRIPEFS" df "$TMP/nonexistent")" 1 "df of a missing path"
grep -q '^stripefs: ' "$TMP/err" || fail "failure without the stripefs: prefix: $(cat "$TMP/err")"
assert_eq "$(rc_of "$STRIPEFS" --help)" 0 "--help"
assert_eq "$(rc_of "$STRIPEFS" --version)" 0 "--version"

mkfs_pool
log "--- the mount's source is the metadata directory"
mount_pool
assert_eq "$(findmnt -n -o SOURCE --mountpoint "$MNT")" "$META" "the source of stripefs mount META MNT"
unmount_pool
mkdir -p "$TMP/rel"
(cd "$TMP/rel" && "$STRIPEFS" mount ../meta ../mnt) || fail "mount with relative paths failed"
MOUNTED+=("$META|$MNT")
assert_eq "$(findmnt -n -o SOURCE --mountpoint "$MNT")" "$META" "the source of a mount given relative paths"
unmount_pool

log "--- a mount over a non-empty directory"
echo "hidden by a mount" >"$MNT/already-here"
if "$STRIPEFS" mount "$META" "$MNT" 2>"$TMP/err"; then fail "mounted over a non-empty directory"; fi
grep -q "nonempty" "$TMP/err" || fail "the refusal does not name -o nonempty: $(cat "$TMP/err")"
! mountpoint -q "$MNT" || fail "$MNT is mounted after the refusal"
ok "refused: $(cat "$TMP/err")"
MOUNT_OPTS=(-o nonempty)
mount_pool
[[ ! -e "$MNT/already-here" ]] || fail "the directory's own file shows through the mount"
echo "in the pool" >"$MNT/pooled"
unmount_pool
assert_eq "$(cat "$MNT/already-here")" "hidden by a mount" "the directory's file after unmount"
rm "$MNT/already-here"
MOUNT_OPTS=()

log "--- a dead mount"
mount_pool
assert_eq "$(cat "$MNT/pooled")" "in the pool" "a file written under -o nonempty"
pid=$(daemon_pid)
kill -9 "$pid"
wait_pid_gone "$pid" || fail "daemon $pid survived kill -9"
for cmd in df stats; do
    assert_eq "$(rc_of "$STRIPEFS" "$cmd" "$MNT")" 1 "stripefs $cmd on a dead mount"
    for want in "dead mount" "fusermount3 -u $MNT" "stripefs mount $META $MNT"; do
        grep -qF "$want" "$TMP/err" || fail "stripefs $cmd on a dead mount: message lacks '$want': $(cat "$TMP/err")"
    done
    ok "stripefs $cmd: $(cat "$TMP/err")"
done
assert_eq "$(rc_of "$STRIPEFS" placement "$MNT/pooled")" 1 "stripefs placement on a dead mount"
grep -qF "dead mount" "$TMP/err" || fail "placement on a dead mount: $(cat "$TMP/err")"
if "$STRIPEFS" mount "$META" "$MNT" 2>"$TMP/err"; then fail "mounted over a dead mount"; fi
grep -qF "fusermount3 -u" "$TMP/err" || fail "mount over a dead mount: $(cat "$TMP/err")"
ok "stripefs mount over the dead mount: $(cat "$TMP/err")"
fusermount3 -u "$MNT" || fail "fusermount3 -u of the dead mount failed"
mount_pool
assert_eq "$(cat "$MNT/pooled")" "in the pool" "the file after the remount"

log "--- stripefs df on a degraded mount"
unmount_pool
mv "${DRIVES[1]}" "$TMP/lost.img"
MOUNT_OPTS=(-o degraded)
mount_pool
"$STRIPEFS" df "$MNT" --json >"$TMP/df.json" || fail "stripefs df --json on a degraded mount failed"
assert_eq "$(json '",".join(s["state"] for s in d["segments"] if s["kind"] == "drive")' <"$TMP/df.json")" \
    "present,missing,present,present" "the drives' states in df --json"
"$STRIPEFS" df "$MNT" >"$TMP/df.txt" || fail "stripefs df on a degraded mount failed"
line=$(grep -E '^ +1 drive' "$TMP/df.txt")
[[ "$line" == *missing* ]] || fail "df's table does not mark drive 1 missing: $line"
ok "df's table: $line"
unmount_pool
mv "$TMP/lost.img" "${DRIVES[1]}"
MOUNT_OPTS=()

log "--- df(1) on a pool with 2 replicas"
rm -rf "$META" "${DRIVES[@]}"
mkfs_pool --replicas 2
mount_pool
"$STRIPEFS" df "$MNT" --json >"$TMP/df.json"
raw=$(json 'sum(s["capacity"] for s in d["segments"] if s["kind"] == "drive")' <"$TMP/df.json")
assert_eq "$(json 'd["usable"]["replicas"]' <"$TMP/df.json")" 2 "usable.replicas"
assert_eq "$(json "d['usable']['capacity'] == $raw // 2" <"$TMP/df.json")" true "usable capacity is half of 4 equal drives"
size=$(df -B1 --output=size "$MNT" | tail -n 1 | tr -d ' ')
assert_eq "$(json "abs($size - d['usable']['capacity']) < 4096" <"$TMP/df.json")" true "df(1) size ($size) is the usable capacity"
"$STRIPEFS" df "$MNT" | grep -q "data at the pool's 2 replicas" || fail "df's table does not show the usable space"
# What df(1) calls free can be written: fill half of it at 2 replicas and see it drop by the data written.
avail=$(df -B1 --output=avail "$MNT" | tail -n 1 | tr -d ' ')
head -c $((avail / 2)) /dev/urandom >"$MNT/half" || fail "writing half of df's free space failed"
sync "$MNT/half"
wait_until "df reflects the write" bash -c "(( \$(df -B1 --output=avail '$MNT' | tail -n 1) < $avail * 6 / 10 ))"
ok "df(1) free after writing half of it at 2 replicas: $(df -h --output=avail "$MNT" | tail -n 1)"

log "--- stripefs layout: a refused value says why"
mkdir "$MNT/dir"
# setfattr gets only EINVAL for a value the pool cannot honour ...
if setfattr -n user.stripefs.replicas -v 5 "$MNT/dir" 2>"$TMP/err"; then fail "setfattr replicas=5 was accepted"; fi
# ... stripefs layout names the reason, and sets nothing.
assert_eq "$(rc_of "$STRIPEFS" layout "$MNT/dir" replicas=5)" 1 "layout replicas=5"
grep -qF "replicas '5' must be 1, 2 or 3" "$TMP/err" || fail "layout replicas=5: $(cat "$TMP/err")"
ok "refused: $(cat "$TMP/err")"
assert_eq "$(rc_of "$STRIPEFS" layout "$MNT/dir" strategy=fastest)" 1 "layout with an unknown strategy"
grep -qF "unknown strategy 'fastest' (choose one of: " "$TMP/err" || fail "layout strategy=fastest: $(cat "$TMP/err")"
assert_eq "$(rc_of "$STRIPEFS" layout "$MNT/dir" chunk_size=3M)" 1 "layout chunk_size=3M"
grep -qF "must be a power of two" "$TMP/err" || fail "layout chunk_size=3M: $(cat "$TMP/err")"
assert_eq "$(rc_of "$STRIPEFS" layout "$MNT/dir" colour=blue)" 2 "layout with an unknown key"
assert_eq "$(rc_of "$STRIPEFS" layout "$MNT/half" replicas=1)" 1 "layout of a regular file"
grep -qF "not a directory" "$TMP/err" || fail "layout of a file: $(cat "$TMP/err")"
"$STRIPEFS" layout "$MNT/dir" --json >"$TMP/layout.json" || fail "layout --json failed"
assert_eq "$(json '(d["replicas"], d["chunk_size"], d["set"])' <"$TMP/layout.json")" "(2, 4194304, [])" \
    "the layout of a directory with no settings is the pool's"
"$STRIPEFS" layout "$MNT/dir" replicas=1 chunk_size=8M >"$TMP/out" || fail "layout replicas=1 chunk_size=8M failed"
grep -q "replicas .*1 .*(this directory)" "$TMP/out" || fail "layout's table: $(cat "$TMP/out")"
assert_eq "$(getfattr --only-values -n user.stripefs.chunk_size "$MNT/dir")" 8388608 "the chunk_size attribute"
echo data >"$MNT/dir/file"
assert_eq "$(getfattr --only-values -n user.stripefs.layout "$MNT/dir/file" | json 'd["replicas"], d["chunk_size"]')" \
    "(1, 8388608)" "the layout of a file created in the directory"
"$STRIPEFS" layout "$MNT/dir" replicas= --json >"$TMP/layout.json" || fail "layout replicas= failed"
assert_eq "$(json '(d["replicas"], d["set"])' <"$TMP/layout.json")" "(2, ['chunk_size'])" \
    "replicas= goes back to the pool's default"
unmount_pool
