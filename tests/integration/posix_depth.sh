#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# POSIX in depth (issue 20): what posix_depth.py checks on a real mount, then
# what needs the mount itself: -o strictatime moves atime on every read, and
# -o remount turns the running mount read-only and back (stripefs mount -o
# remount and mount(8)'s helper; no second daemon), -o dev,suid count for
# root and are refused for others, and an overlayfs mount
# keeps its upper directory on stripefs (whiteouts by RENAME_WHITEOUT). Then
# fsck.
source "$(dirname "$0")/lib.sh"
need fio
python3 "$(dirname "$0")/posix_depth.py" "$MNT" || fail "posix_depth.py checks failed"

atime_ns() { python3 -c 'import os, sys; print(os.stat(sys.argv[1]).st_atime_ns)' "$1"; }
read_twice_moves_atime() {  # FILE: whether a second read right after a first moved atime
    local a b
    cat "$1" >/dev/null
    a=$(atime_ns "$1")
    sleep 0.01  # the clock must move between the reads; not a timing threshold
    cat "$1" >/dev/null
    b=$(atime_ns "$1")
    [[ $b -gt $a ]] && echo moved || echo kept
}

log "--- atime: relatime by default, every read with -o strictatime"
echo "atime" >"$MNT/atime"
assert_eq "$(read_twice_moves_atime "$MNT/atime")" kept "a second read under relatime"
unmount_pool
MOUNT_OPTS=(-o strictatime)
mount_pool
grep -q " $MNT fuse.stripefs " /proc/mounts || fail "-o strictatime did not mount"
assert_eq "$(read_twice_moves_atime "$MNT/atime")" moved "a second read under -o strictatime"
unmount_pool
MOUNT_OPTS=(-o noatime,strictatime)  # strictatime outranks noatime, as for the kernel
mount_pool
assert_eq "$(read_twice_moves_atime "$MNT/atime")" moved "a second read under -o noatime,strictatime"
unmount_pool
MOUNT_OPTS=()
mount_pool

mount_flags() { awk -v m="$MNT" '$2 == m { split($4, f, ","); print f[1] }' /proc/mounts; }
log "--- -o remount,ro and back"
pid=$(daemon_pid)
echo "before" >"$MNT/kept"
"$STRIPEFS" mount "$META" "$MNT" -o remount,ro || fail "stripefs mount -o remount,ro failed"
assert_eq "$(mount_flags)" ro "the mount's flag after remount,ro"
expect_errno EROFS 'open(sys.argv[1], "w")' "$MNT/new"
assert_eq "$(cat "$MNT/kept")" before "a file read on the read-only mount"
assert_eq "$(daemon_pid)" "$pid" "the daemon serving it (no second one)"
"$STRIPEFS" mount "$META" "$MNT" -o remount,rw || fail "stripefs mount -o remount,rw failed"
assert_eq "$(mount_flags)" rw "the mount's flag after remount,rw"
echo "after" >"$MNT/new" || fail "a write after remount,rw failed"
# mount(8) runs the helper with the mount's source (the metadata directory)
# and its current options merged in.
HELPER=$TMP/mount.fuse.stripefs
sed "s#@STRIPEFS_BIN@#$STRIPEFS#" "$(dirname "$0")/../../packaging/mount.fuse.stripefs" >"$HELPER"
chmod +x "$HELPER"
"$HELPER" "$META" "$MNT" -o "ro,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other" \
    || fail "the helper's remount,ro failed"
assert_eq "$(mount_flags)" ro "the mount's flag after the helper's remount,ro"
"$HELPER" "$META" "$MNT" -o "rw,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other" \
    || fail "the helper's remount,rw failed"
assert_eq "$(mount_flags)" rw "the mount's flag after the helper's remount,rw"
grep " $MNT " /proc/mounts | grep -q nosuid || fail "remount dropped nosuid"
if "$STRIPEFS" mount "$META" "$TMP" -o remount,ro 2>"$TMP/err"; then fail "remount of a directory that is no mount succeeded"; fi
grep -q "not a stripefs mount" "$TMP/err" || fail "remount of no mount: unclear message: $(cat "$TMP/err")"
ok "remount of a directory that is no stripefs mount is refused: $(cat "$TMP/err")"
assert_eq "$(daemon_pid)" "$pid" "the daemon after the remounts"

log "--- -o dev,suid: honoured for root, refused for others"
grep " $MNT " /proc/mounts | grep -q "nosuid,nodev" || fail "a default mount is not nosuid,nodev"
unmount_pool
MOUNT_OPTS=(-o dev,suid)
mount_pool
flags=$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)
[[ ,$flags, == *,nosuid,* || ,$flags, == *,nodev,* ]] && fail "root's -o dev,suid mount is $flags"
ok "root's -o dev,suid mount: $flags"
unmount_pool
MOUNT_OPTS=()
mount_pool
# A user's mount of its own pool (the option is refused before the pool or /dev/fuse is touched).
mkdir -p "$TMP/user-mnt"
chown nobody "$TMP/user-mnt"
for opt in suid dev; do
    if su nobody -s /bin/sh -c "'$STRIPEFS' mount '$META' '$TMP/user-mnt' -o $opt" 2>"$TMP/err"; then
        fail "-o $opt by a user mounted"
    fi
    grep -q "needs root" "$TMP/err" || fail "-o $opt by a user: unclear message: $(cat "$TMP/err")"
    ok "-o $opt by a user is refused: $(cat "$TMP/err")"
done
grep -q " $TMP/user-mnt " /proc/mounts && fail "a refused user mount is mounted"

log "--- overlayfs with its upper directory on stripefs (RENAME_WHITEOUT)"
mkdir -p "$TMP/lower" "$TMP/merged" "$MNT/upper" "$MNT/work"
echo "lower a" >"$TMP/lower/a"
echo "lower b" >"$TMP/lower/b"
unmount_overlay() { ! mountpoint -q "$TMP/merged" || umount "$TMP/merged" || umount -l "$TMP/merged"; }
BEFORE_UNMOUNT_HOOKS+=(unmount_overlay)
timeout 60 mount -t overlay overlay -o "lowerdir=$TMP/lower,upperdir=$MNT/upper,workdir=$MNT/work,userxattr" "$TMP/merged" \
    || fail "mount -t overlay with the upper directory on stripefs failed: $(dmesg 2>/dev/null | grep overlayfs | tail -3)"
timeout 60 rm "$TMP/merged/a" || fail "rm of a lower file through the overlay failed"
timeout 60 mv "$TMP/merged/b" "$TMP/merged/c" || fail "mv of a lower file through the overlay failed"
echo "upper" >"$TMP/merged/n"
assert_eq "$(ls "$TMP/merged" | tr '\n' ' ')" "c n " "the merged directory after rm a, mv b c"
assert_eq "$(cat "$TMP/merged/c")" "lower b" "the moved file's bytes"
assert_eq "$(stat -c '%F %t:%T' "$MNT/upper/a")" "character special file 0:0" "the whiteout of a in the upper directory"
assert_eq "$(stat -c '%F %t:%T' "$MNT/upper/b")" "character special file 0:0" "the whiteout of b in the upper directory"
umount "$TMP/merged" || fail "umount of the overlay failed"

unmount_pool
fsck_pool
