#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# O_DIRECT opens: their writes go straight to the daemon, one request each
# (not gathered in the page cache), and every other open sees their bytes
# (a reader whose pages are cached, a buffered writer's bytes read back
# through O_DIRECT, mmap of a plain open). The data survives a remount. An
# O_DIRECT open maps private, not shared.
source "$(dirname "$0")/lib.sh"
need python3

head -c $((4 * MiB)) /dev/urandom >"$TMP/ref"
cp "$TMP/ref" "$MNT/f"

writes() { "$STRIPEFS" stats "$MNT" --json | json 'd["requests"]["write"]["count"]'; }

# 256 in-place 4 KiB O_DIRECT writes: 256 WRITE requests.
head -c $((MiB)) /dev/urandom >"$TMP/patch"
w1=$(writes)
dd if="$TMP/patch" of="$MNT/f" bs=4k count=256 seek=256 oflag=direct conv=notrunc status=none \
    || fail "dd oflag=direct into an existing file failed"
w2=$(writes)
dd if="$TMP/patch" of="$TMP/ref" bs=4k count=256 seek=256 conv=notrunc status=none
assert_eq "$((w2 - w1))" 256 "WRITE requests for 256 O_DIRECT writes of 4 KiB"
cmp "$TMP/ref" "$MNT/f" || fail "the file differs after the O_DIRECT overwrite"
ok "the O_DIRECT overwrite reads back"

# One process, three opens of one file: a buffered reader that has the file
# in its page cache, an O_DIRECT writer, a shared mmap of a plain open.
python3 - "$MNT/f" "$TMP/expected" <<'EOF' || fail "an open missed bytes another open wrote"
import mmap, os, sys
path = sys.argv[1]
size = os.path.getsize(path)
buffered = os.open(path, os.O_RDONLY)
before = os.pread(buffered, size, 0)          # now in the page cache
plain = os.open(path, os.O_RDWR)
view = mmap.mmap(plain, size, mmap.MAP_SHARED)
assert view[:size] == before
direct = os.open(path, os.O_RDWR | os.O_DIRECT)
block = mmap.mmap(-1, 1 << 20)                 # page-aligned, as O_DIRECT needs
block.write(os.urandom(1 << 20))
assert os.pwrite(direct, block, 1 << 20) == 1 << 20
after = os.pread(buffered, size, 0)
if after[1 << 20:2 << 20] != block[:]:
    sys.exit("the buffered reader still sees its cached pages, not the O_DIRECT write")
if view[1 << 20:2 << 20] != block[:]:
    sys.exit("the shared mmap still shows the old bytes")
# The other way round: a buffered write, read back through the O_DIRECT open.
tail = os.urandom(4096)
os.pwrite(plain, tail, size - 4096)
got = mmap.mmap(-1, 4096)
assert os.preadv(direct, [got], size - 4096) == 4096
if got[:] != tail:
    sys.exit("the O_DIRECT reader missed a buffered write")
for fd in (buffered, plain, direct):
    os.close(fd)
with open(sys.argv[2], "wb") as out:
    out.write(before[:1 << 20] + block[:] + before[2 << 20:size - 4096] + tail)
EOF
cmp "$TMP/expected" "$MNT/f" || fail "the file is not what the three opens wrote"
ok "a cached reader, a shared mmap and an O_DIRECT open see each other's writes"

# An O_DIRECT open is answered with direct_io, which the kernel does not let
# be mapped shared (libfuse 3.14 cannot negotiate FUSE_DIRECT_IO_ALLOW_MMAP);
# a private mapping works, as does a shared one of a plain open (above).
expect_errno ENODEV '
import mmap
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
mmap.mmap(fd, 4096, mmap.MAP_SHARED)' "$MNT/f"
python3 - "$MNT/f" "$TMP/expected" <<'EOF' || fail "a private mmap of an O_DIRECT open does not show the file"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
view = mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ)
assert view[:] == open(sys.argv[2], "rb").read(4096)
EOF
ok "a private mmap of an O_DIRECT open shows the file"

remount_pool
cmp "$TMP/expected" "$MNT/f" || fail "the file differs after remount"
ok "the O_DIRECT writes are there after remount"
unmount_pool
fsck_pool
