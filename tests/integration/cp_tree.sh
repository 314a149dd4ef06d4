#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cp -a of a tree of awkward file sizes, links and dirs; survives remount;
# rm -rf gives the space back; fsck clean.
source "$(dirname "$0")/lib.sh"
need diff; need cp

SRC=$TMP/src
mkdir -p "$SRC"/a/b/c "$SRC"/big "$SRC"/empty_dir
mkfile() { head -c "$2" /dev/urandom >"$SRC/$1"; }
: >"$SRC/zero"
mkfile one 1
mkfile a/f4095 4095
mkfile a/f4096 4096
mkfile a/b/f4097 4097
mkfile a/b/k100 $((100 * 1024))
mkfile a/b/c/m1p7 $((MiB + 7))
mkfile big/m4 $((4 * MiB))
mkfile big/m4p1 $((4 * MiB + 1))
mkfile big/m9 $((9 * MiB))
mkfile big/m64 $((64 * MiB))
ln -s big/m4 "$SRC/sym"
ln "$SRC/a/b/f4097" "$SRC/a/hard"
SRC_BYTES=$(find "$SRC" -type f -links 1 -printf '%s\n' | awk '{s += $1} END {print s + 4097}')
log "source tree: $(find "$SRC" | wc -l) entries, $SRC_BYTES bytes of file data"

# Type, size, mode, mtime (ns), nlink and symlink target of every entry.
listing() {
    python3 - "$1" <<'EOF'
import os, stat, sys
root = sys.argv[1]
for dirpath, dirs, files in os.walk(root):
    for name in sorted(dirs + files):
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if stat.S_ISLNK(st.st_mode):
            print(rel, "link", os.readlink(p))
        elif stat.S_ISDIR(st.st_mode):
            print(rel, "dir", oct(st.st_mode), st.st_mtime_ns)
        else:
            print(rel, "file", st.st_size, oct(st.st_mode), st.st_mtime_ns, st.st_nlink)
EOF
}

check_tree() {  # check_tree WHEN
    diff -r "$SRC" "$MNT/tree" || fail "diff -r source vs mount differs ($1)"
    ok "diff -r source vs mount: identical ($1)"
    diff <(listing "$SRC" | sort) <(listing "$MNT/tree" | sort) \
        || fail "types/sizes/modes/mtimes/links differ ($1)"
    ok "types, sizes, modes, mtimes, nlinks and symlink targets preserved ($1)"
    assert_eq "$(readlink "$MNT/tree/sym")" big/m4 "symlink target ($1)"
    local i1 i2
    i1=$(stat -c %i "$MNT/tree/a/hard"); i2=$(stat -c %i "$MNT/tree/a/b/f4097")
    assert_eq "$i1" "$i2" "hard link shares the inode number ($1)"
    assert_eq "$(stat -c %h "$MNT/tree/a/hard")" 2 "hard link count ($1)"
    [[ -d "$MNT/tree/empty_dir" && -z "$(ls -A "$MNT/tree/empty_dir")" ]] || fail "empty dir missing or not empty ($1)"
    ok "empty dir present ($1)"
}

cp -a "$SRC" "$MNT/tree" || fail "cp -a into the mount failed"
log "copied with cp -a"
check_tree "after cp -a"

remount_pool
log "remounted"
check_tree "after remount"

used_before=$(used_bytes)
rm -rf "$MNT/tree" || fail "rm -rf of the tree failed"
[[ ! -e "$MNT/tree" ]] || fail "tree still exists after rm -rf"
freed_enough() { (( used_before - $(used_bytes) >= SRC_BYTES * 9 / 10 )); }
wait_until "drive 'used' to drop by >= 90% of $SRC_BYTES after rm -rf (was $used_before)" freed_enough
ok "df --json drive used went from $used_before to $(used_bytes) after rm -rf"

unmount_pool
fsck_pool
