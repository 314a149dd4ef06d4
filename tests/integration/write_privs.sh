#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A write clears the set-user-ID bit, and set-group-ID when group execute is
# set, unless the writer has CAP_FSETID (root). The mount negotiates
# FUSE_HANDLE_KILLPRIV_V2, so the daemon does the clearing, on the kernel's
# kill flags, for buffered and O_DIRECT writes alike, for a truncate and an
# O_TRUNC open without CAP_FSETID and for every chown. Writes, buffered or
# O_DIRECT, then cost no GETXATTR security.capability request each, and user.*
# xattrs keep working around writes. fallocate and a punched hole clear them
# as a write does, and set-group-ID also when the caller is not in the file's
# group.
source "$(dirname "$0")/lib.sh"
need python3; need setpriv; need setfattr; need getfattr
chmod 0755 "$TMP"   # let `nobody` reach the mountpoint

nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
[[ -x /usr/bin/python3 ]] || fail "nobody needs /usr/bin/python3 (root's python3 may not be reachable)"

# write_block FILE buffered|direct: one 4 KiB write of "w" at offset 4096.
cat >"$TMP/write_block.py" <<'EOF'
import mmap, os, sys
path, how = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | (os.O_DIRECT if how == "direct" else 0))
block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
block.write(b"w" * 4096)
assert os.pwrite(fd, block, 4096) == 4096
os.close(fd)
EOF
write_block() { python3 "$TMP/write_block.py" "$@"; }

block_written() { [[ "$(dd if="$1" bs=4096 skip=1 count=1 status=none | tr -d w | wc -c)" == 0 ]]; }

for how in buffered direct; do
    log "--- suid/sgid and $how writes"
    f=$MNT/privs_$how
    head -c $((64 * 1024)) /dev/zero >"$f"
    chown 65534:65534 "$f"

    chmod 6775 "$f"
    nobody /usr/bin/python3 "$TMP/write_block.py" "$f" $how || fail "nobody's $how write failed"
    block_written "$f" || fail "nobody's $how write did not reach the file"
    assert_eq "$(stat -c %a "$f")" 775 "mode after nobody's $how write to a 6775 file"

    chmod 2765 "$f"   # set-group-ID without group execute: not a privilege, stays
    nobody /usr/bin/python3 "$TMP/write_block.py" "$f" $how || fail "nobody's $how write failed"
    assert_eq "$(stat -c %a "$f")" 2765 "mode after nobody's $how write to a 2765 file"

    chmod 6775 "$f"
    write_block "$f" "$how"
    assert_eq "$(stat -c %a "$f")" 6775 "mode after root's $how write to a 6775 file"
done

log "--- suid/sgid and truncate, O_TRUNC, chown"
f=$MNT/privs_trunc
head -c 8192 /dev/zero >"$f"
chmod 6777 "$f"
nobody truncate -s 4096 "$f" || fail "nobody's truncate failed"
assert_eq "$(stat -c %a "$f")" 777 "mode after nobody's truncate of a 6777 file"
chmod 6777 "$f"
truncate -s 2048 "$f"
assert_eq "$(stat -c %a "$f")" 6777 "mode after root's truncate of a 6777 file"
nobody sh -c ": >'$f'" || fail "nobody's O_TRUNC open failed"
assert_eq "$(stat -c %a "$f")" 777 "mode after nobody's O_TRUNC open of a 6777 file"
assert_eq "$(stat -c %s "$f")" 0 "size after the O_TRUNC open"
chmod 6775 "$f"
chown 65534 "$f"
assert_eq "$(stat -c %a "$f")" 775 "mode after root's chown of a 6775 file (suid, and sgid with group execute, go)"
chmod 2765 "$f"
chown 0 "$f"
assert_eq "$(stat -c %a "$f")" 2765 "mode after root's chown of a 2765 file (sgid without group execute stays)"
remount_pool
assert_eq "$(stat -c %a "$f")" 2765 "mode after a remount"

# fallocate FILE MODE: fallocate(2) of the file's first 8 KiB with MODE (0:
# allocate, 3: punch a hole, keeping the size).
cat >"$TMP/fallocate.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_WRONLY)
if libc.fallocate(fd, int(sys.argv[2]), 0, 8192) != 0:
    sys.exit(f"fallocate: {os.strerror(ctypes.get_errno())}")
EOF
for mode in 0 3; do
    what=$([[ $mode == 0 ]] && echo fallocate || echo "a punched hole")
    log "--- suid/sgid and $what"
    f=$MNT/privs_falloc$mode
    head -c $((64 * 1024)) /dev/urandom >"$f"
    chmod 2666 "$f"   # root's group, which nobody is not in: set-group-ID goes
    nobody /usr/bin/python3 "$TMP/fallocate.py" "$f" $mode || fail "nobody's $what failed"
    assert_eq "$(stat -c %a "$f")" 666 "mode after nobody's $what on a 2666 file of another group"
    chmod 4666 "$f"
    nobody /usr/bin/python3 "$TMP/fallocate.py" "$f" $mode || fail "nobody's $what failed"
    assert_eq "$(stat -c %a "$f")" 666 "mode after nobody's $what on a 4666 file"
    chown 65534:65534 "$f"
    chmod 2765 "$f"   # nobody's own group, no group execute: stays
    nobody /usr/bin/python3 "$TMP/fallocate.py" "$f" $mode || fail "nobody's $what failed"
    assert_eq "$(stat -c %a "$f")" 2765 "mode after nobody's $what on a 2765 file of its group"
    chmod 6775 "$f"
    python3 "$TMP/fallocate.py" "$f" $mode || fail "root's $what failed"
    assert_eq "$(stat -c %a "$f")" 6775 "mode after root's $what on a 6775 file"
done

log "--- the cleared bits are stored"
chmod 6775 "$MNT/privs_direct"
nobody /usr/bin/python3 "$TMP/write_block.py" "$MNT/privs_direct" direct || fail "nobody's direct write failed"
remount_pool
assert_eq "$(stat -c %a "$MNT/privs_direct")" 775 "mode of the O_DIRECT-written file after a remount"

log "--- GETXATTR requests around writes"
getxattrs() { "$STRIPEFS" stats "$MNT" --json | json 'd["requests"].get("getxattr", {}).get("count", 0)'; }
head -c $((MiB)) /dev/urandom >"$MNT/g"
g0=$(getxattrs); g1=$(getxattrs)
own=$((g1 - g0))   # what one `stripefs stats` costs itself
dd if=/dev/zero of="$MNT/g" bs=4k count=64 oflag=direct conv=notrunc status=none
g2=$(getxattrs)
assert_eq "$((g2 - g1 - own))" 0 "GETXATTR requests for 64 O_DIRECT writes"
# Through the page cache: without FUSE_HANDLE_KILLPRIV_V2 the kernel asks
# before every write (file_remove_privs); with it, only the first write after
# the file's attributes were refreshed asks, then the inode is marked S_NOSEC.
dd if=/dev/zero of="$MNT/g" bs=4k count=64 conv=notrunc status=none
g3=$(getxattrs)
(( g3 - g2 - own <= 2 )) || fail "64 buffered writes: expected at most 2 GETXATTR requests, got $((g3 - g2 - own))"
ok "64 buffered writes asked $((g3 - g2 - own)) times"

log "--- user.* xattrs around writes"
setfattr -n user.color -v blue "$MNT/g"
dd if=/dev/zero of="$MNT/g" bs=4k count=8 oflag=direct conv=notrunc status=none
dd if=/dev/zero of="$MNT/g" bs=4k count=8 conv=notrunc status=none
assert_eq "$(getfattr --only-values -n user.color "$MNT/g")" blue "a user.* xattr after writes"
setfattr -n user.size -v 42 "$MNT/g"
dd if=/dev/zero of="$MNT/g" bs=4k count=8 oflag=direct conv=notrunc status=none
assert_eq "$(getfattr --absolute-names -d -m '^user\.' "$MNT/g" | grep -c '^user\.')" 2 "user.* xattrs listed after more writes"
assert_eq "$(getfattr --only-values -n user.size "$MNT/g")" 42 "a user.* xattr set between writes"
