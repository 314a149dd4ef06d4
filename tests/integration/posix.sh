#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# POSIX semantics a local filesystem has. Mounted with allow_other so that the
# permission checks as `nobody` reach the filesystem.
MOUNT_OPTS=(-o allow_other)
source "$(dirname "$0")/lib.sh"
need setfattr; need getfattr; need setpriv; need truncate; need cmp; need du

chmod 0755 "$TMP"   # let `nobody` reach the mountpoint
D=$MNT/p
mkdir "$D"
cd "$D"

log "--- open flags"
echo first >excl
expect_errno EEXIST 'os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)' excl
python3 -c 'import os; os.close(os.open("excl-new", os.O_CREAT | os.O_EXCL | os.O_WRONLY))' || fail "O_EXCL create of a new name failed"
ok "O_EXCL create of a new name succeeds"
head -c 10000 /dev/urandom >trunc
python3 -c 'import os; fd = os.open("trunc", os.O_WRONLY | os.O_TRUNC); assert os.fstat(fd).st_size == 0; os.write(fd, b"abc"); os.close(fd)' \
    || fail "open O_TRUNC did not give size 0"
assert_eq "$(cat trunc)" abc "content after O_TRUNC + write"

log "--- sparse file"
python3 -c 'import os; fd = os.open("sparse", os.O_WRONLY | os.O_CREAT, 0o644); os.pwrite(fd, b"x", 100 << 20); os.close(fd)'
assert_eq "$(stat -c %s sparse)" $((100 * MiB + 1)) "size of file with 1 byte at 100 MiB"
cmp -n $((100 * MiB)) sparse /dev/zero || fail "the hole before 100 MiB does not read as zeros"
ok "the 100 MiB hole reads as zeros"
assert_eq "$(tail -c 1 sparse)" x "last byte of the sparse file"
alloc=$(( $(stat -c '%b * %B' sparse) ))
((alloc < 10 * MiB)) || fail "sparse file allocates $alloc bytes (st_blocks), expected far below its size"
ok "sparse file: st_blocks = $alloc bytes, du says $(du -B1 sparse | cut -f1)"

log "--- truncate"
head -c $((10 * MiB)) /dev/urandom >"$TMP/tr.ref"
cp "$TMP/tr.ref" tr
for size in $((3 * MiB + 5)) $((10 * MiB)) 1000 0 $((5 * MiB + 3)); do
    truncate -s "$size" "$TMP/tr.ref"
    truncate -s "$size" tr
    assert_eq "$(stat -c %s tr)" "$size" "size after truncate -s $size"
    cmp "$TMP/tr.ref" tr || fail "content after truncate -s $size differs (kept part must stay, grown part must be zeros)"
done
ok "truncate down keeps the prefix, truncate up reads zeros"

log "--- rename"
echo A >ra; echo B >rb
python3 -c 'import os; os.rename("ra", "rb")'
[[ ! -e ra ]] || fail "rename source still exists"
assert_eq "$(cat rb)" A "content of the replaced target after rename"
mkdir -p d1/sub d2 && echo in >d1/sub/f
python3 -c 'import os; os.rename("d1", "d2/moved")'
[[ ! -e d1 ]] || fail "renamed directory still present under its old name"
assert_eq "$(cat d2/moved/sub/f)" in "file inside a renamed directory"
assert_eq "$(stat -c %h d2)" 3 "nlink of the new parent after moving a dir into it"
mkdir -p full1/a full2/b
expect_errno ENOTEMPTY 'os.rename(sys.argv[1], sys.argv[2])' full1 full2
mkdir emptydst
python3 -c 'import os; os.rename("full1", "emptydst")' || fail "rename of a dir onto an empty dir failed"
[[ -d emptydst/a && ! -e full1 ]] || fail "rename onto an empty dir did not replace it"
ok "rename of a dir onto an empty dir replaces it"
RENAME_NOREPLACE='
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 1) != 0:
    e = ctypes.get_errno(); raise OSError(e, os.strerror(e))'
echo C >nr1; echo D >nr2
expect_errno EEXIST "$RENAME_NOREPLACE" nr1 nr2
assert_eq "$(cat nr2)" D "target untouched by failed RENAME_NOREPLACE"
python3 -c "import ctypes, os, sys; $RENAME_NOREPLACE" nr1 nr3 || fail "RENAME_NOREPLACE to a free name failed"
assert_eq "$(cat nr3)" C "RENAME_NOREPLACE to a free name moved the file"

log "--- directories"
mkdir dd && touch dd/f
expect_errno ENOTEMPTY 'os.rmdir(sys.argv[1])' dd
rm dd/f && rmdir dd && [[ ! -e dd ]] || fail "rmdir of an empty dir failed"
ok "rmdir of an empty dir"
expect_errno EEXIST 'os.mkdir(sys.argv[1])' d2
mkdir many
python3 -c 'import os; [open(f"many/entry-{i:04d}", "w").close() for i in range(1000)]'
python3 - <<'EOF' || fail "readdir of 1,000 entries is wrong"
import os
names = os.listdir("many")
assert len(names) == 1000, f"{len(names)} entries listed"
assert len(set(names)) == 1000, "duplicates in the listing"
assert sorted(names) == [f"entry-{i:04d}" for i in range(1000)], "wrong names"
EOF
ok "readdir lists 1,000 entries exactly once"
mkdir -p nl/s1 nl/s2 nl/s3 && touch nl/f1 nl/f2
assert_eq "$(stat -c %h nl)" 5 "nlink of a dir with 3 subdirs"
rmdir nl/s3
assert_eq "$(stat -c %h nl)" 4 "nlink after rmdir of a subdir"
mv nl/s2 d2/
assert_eq "$(stat -c %h nl)" 3 "nlink after moving a subdir out"

log "--- attributes"
echo attrs >at
chmod 0751 at
assert_eq "$(stat -c %a at)" 751 "mode after chmod"
chown 1234:5678 at
assert_eq "$(stat -c %u:%g at)" 1234:5678 "owner after chown"
touch -d '2001-02-03 04:05:06.123456789 UTC' at
assert_eq "$(stat -c %Y.%X at)" 981173106.981173106 "mtime and atime after touch -d"
assert_eq "$(python3 -c 'import os; print(os.stat("at").st_mtime_ns)')" 981173106123456789 "mtime nanoseconds"
touch -m -d '2010-01-01 00:00:00 UTC' at
assert_eq "$(stat -c %Y.%X at)" 1262304000.981173106 "touch -m changes mtime only"

log "--- links"
ln -s at sym
ln -s no-such-target dangling
assert_eq "$(readlink sym)" at "readlink"
assert_eq "$(cat sym)" attrs "read through a symlink"
assert_eq "$(stat -c %F dangling)" "symbolic link" "a dangling symlink exists"
echo hard >h1
ln h1 h2
assert_eq "$(stat -c %h h1)" 2 "nlink after ln"
assert_eq "$(stat -c %i h1)" "$(stat -c %i h2)" "hard links share an inode"
echo more >>h2
assert_eq "$(cat h1)" "$(printf 'hard\nmore')" "a write through one link is seen through the other"
rm h1
assert_eq "$(stat -c %h h2)" 1 "nlink after unlinking one link"
assert_eq "$(cat h2)" "$(printf 'hard\nmore')" "remaining link still reads the data"

log "--- unlink of an open file"
used_full=$(python3 - "$STRIPEFS" "$MNT" <<'EOF'
import json, os, subprocess, sys
def used():
    d = json.loads(subprocess.check_output([sys.argv[1], "df", sys.argv[2], "--json"]))
    return sum(s["used"] for s in d["segments"] if s["kind"] == "drive")
data = os.urandom(8 << 20)
fd = os.open("open-unlinked", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, data)
os.fsync(fd)
full = used()
os.unlink("open-unlinked")
assert not os.path.exists("open-unlinked"), "name still visible after unlink"
assert os.fstat(fd).st_nlink == 0, "st_nlink of an unlinked open file is not 0"
assert os.pread(fd, len(data), 0) == data, "data not readable through the open fd after unlink"
os.pwrite(fd, b"still writable", 0)
assert os.pread(fd, 14, 0) == b"still writable", "write through the fd after unlink lost"
os.close(fd)
print(full)
EOF
) || fail "unlink of an open file misbehaved"
ok "unlinked open file stays readable/writable through its fd"
freed() { (( used_full - $(used_bytes) >= 7 * MiB )); }
wait_until "space of the unlinked file to be freed after close (used was $used_full)" freed
ok "space freed after close (used $used_full -> $(used_bytes))"

log "--- xattrs"
echo x >xa
setfattr -n user.color -v blue xa
setfattr -n user.size -v 42 xa
assert_eq "$(getfattr --only-values -n user.color xa)" blue "getfattr user.color"
assert_eq "$(getfattr --absolute-names -d -m '^user\.' xa | grep -c '^user\.')" 2 "number of user.* xattrs listed"
setfattr -n user.color -v red xa
assert_eq "$(getfattr --only-values -n user.color xa)" red "getfattr after replace"
setfattr -x user.color xa
if getfattr -n user.color xa >/dev/null 2>&1; then fail "getfattr of a removed xattr succeeded"; fi
expect_errno ENODATA 'os.getxattr(sys.argv[1], "user.color")' xa
expect_errno ENODATA 'os.removexattr(sys.argv[1], "user.nope")' xa
expect_errno EEXIST 'os.setxattr(sys.argv[1], "user.size", b"1", os.XATTR_CREATE)' xa
assert_eq "$(getfattr --absolute-names -d -m '^user\.' xa | grep -c '^user\.')" 1 "user.* xattrs left after remove"

log "--- name length"
n255=$(printf 'n%.0s' $(seq 255)); n256=${n255}x
echo ok >"$n255" || fail "creating a 255-byte name failed"
assert_eq "$(cat "$n255")" ok "file with a 255-byte name"
ls | grep -qx "$n255" || fail "255-byte name not listed"
expect_errno ENAMETOOLONG 'open(sys.argv[1], "w")' "$n256"
expect_errno ENAMETOOLONG 'os.mkdir(sys.argv[1])' "$n256"
expect_errno ENAMETOOLONG 'os.rename("'"$n255"'", sys.argv[1])' "$n256"
rm "$n255"

log "--- statfs"
caps=$("$STRIPEFS" df "$MNT" --json | json 'sum(s["capacity"] for s in d["segments"] if s["kind"] == "drive")')
read -r blocks bsize <<<"$(stat -f -c '%b %S' "$MNT")"
total=$((blocks * bsize))
(( total * 10 >= caps * 9 && total * 10 <= caps * 11 )) || fail "statfs total $total is not within 10% of the drive capacities $caps"
ok "statfs total $total bytes ~ sum of drive capacities $caps"
df -B1 "$MNT" >/dev/null || fail "df -B1 on the mount failed"
free0=$(python3 -c 'import os, sys; s = os.statvfs(sys.argv[1]); print(s.f_bfree * s.f_frsize)' "$MNT")
python3 -c 'import os; fd = os.open("fill32", os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, os.urandom(32 << 20)); os.fsync(fd); os.close(fd)'
free1=$(python3 -c 'import os, sys; s = os.statvfs(sys.argv[1]); print(s.f_bfree * s.f_frsize)' "$MNT")
(( free0 - free1 >= 30 * MiB )) || fail "statfs free space went from $free0 to $free1 after writing 32 MiB"
ok "statfs free space drops by >= 30 MiB after writing 32 MiB"

log "--- permissions (as nobody)"
chmod 0755 "$MNT" "$D"
mkdir -m 0755 rootdir; mkdir -m 0777 opendir
echo secret >secret && chmod 0600 secret
echo public >public && chmod 0644 public
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
assert_eq "$(nobody cat "$D/public")" public "nobody reads a 0644 file"
nobody sh -c "echo mine >'$D/opendir/mine'" || fail "nobody cannot create a file in a 0777 dir"
assert_eq "$(stat -c %u:%g opendir/mine)" 65534:65534 "owner of a file created by nobody"
if nobody sh -c "echo x >'$D/rootdir/x'" 2>"$TMP/err"; then fail "nobody created a file in a root-owned 0755 dir"; fi
grep -q "Permission denied" "$TMP/err" || fail "expected 'Permission denied', got: $(cat "$TMP/err")"
ok "nobody cannot create in a root-owned 0755 dir (Permission denied)"
if nobody cat "$D/secret" 2>"$TMP/err"; then fail "nobody read a 0600 root file"; fi
grep -q "Permission denied" "$TMP/err" || fail "expected 'Permission denied', got: $(cat "$TMP/err")"
ok "nobody cannot read a 0600 root file (Permission denied)"
if nobody sh -c "echo x >>'$D/public'" 2>"$TMP/err"; then fail "nobody wrote to a 0644 root file"; fi
ok "nobody cannot write a 0644 root file"

log "--- after remount"
cd /
remount_pool
cd "$D"
assert_eq "$(stat -c %a:%u:%g:%Y at)" 751:1234:5678:1262304000 "mode, owner, mtime after remount"
assert_eq "$(getfattr --only-values -n user.size xa)" 42 "xattr after remount"
assert_eq "$(readlink sym)" at "symlink after remount"
assert_eq "$(stat -c %s sparse)" $((100 * MiB + 1)) "sparse size after remount"
assert_eq "$(ls many | wc -l)" 1000 "1,000 entries after remount"
assert_eq "$(stat -c %h nl)" 3 "dir nlink after remount"
cmp "$TMP/tr.ref" tr || fail "truncated file differs after remount"
[[ ! -e open-unlinked ]] || fail "unlinked file came back after remount"
! ls -A | grep -q '^\.fuse_hidden' || fail "a .fuse_hidden file is left in $D"
ok "state intact after remount"
cd /
