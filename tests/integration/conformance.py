#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""POSIX calls beyond read/write, checked on a mounted pool the way ext4 answers
them: fallocate (mode 0, KEEP_SIZE, PUNCH_HOLE), lseek SEEK_DATA/SEEK_HOLE,
copy_file_range, renameat2 flags, flock and fcntl locks, shared writable mmap,
timestamps, concurrent O_APPEND writers, and an open-but-unlinked file.

Usage: conformance.py MOUNTPOINT   (prints one line per check; exits 1 at the first failure)
"""
import ctypes
import errno
import fcntl
import mmap
import multiprocessing
import os
import random
import sys
import time

MNT = sys.argv[1]
MiB = 1 << 20
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_COLLAPSE_RANGE = 1, 2, 8
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_FDCWD = -100


def ok(what):
    print(f"[conformance]   ok: {what}", flush=True)


def check(cond, what):
    if not cond:
        print(f"[conformance] FAIL: {what}", file=sys.stderr, flush=True)
        sys.exit(1)
    ok(what)


def expect_errno(code, fn, what):
    try:
        fn()
    except OSError as e:
        check(e.errno == code, f"{what}: {errno.errorcode.get(e.errno)} (want {errno.errorcode[code]})")
        return
    check(False, f"{what}: succeeded, want {errno.errorcode[code]}")


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def path(name):
    return os.path.join(MNT, name)


def test_fallocate():
    p = path("falloc")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fallocate(fd, 0, 0, 9 * MiB)
    st = os.fstat(fd)
    check(st.st_size == 9 * MiB, f"fallocate mode 0 grows the file to 9 MiB (size {st.st_size})")
    check(st.st_blocks * 512 >= 9 * MiB, f"fallocate mode 0 allocates the space (st_blocks {st.st_blocks})")
    check(os.pread(fd, MiB, 4 * MiB) == bytes(MiB), "the allocated range reads as zeros")
    data = os.urandom(12 * MiB)
    os.pwrite(fd, data, 0)
    fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 20 * MiB)
    check(os.fstat(fd).st_size == 12 * MiB, "fallocate KEEP_SIZE leaves the size")
    check(os.pread(fd, 12 * MiB, 0) == data, "fallocate over data leaves the data")
    # Punch 1 MiB inside chunk 0 and the whole of chunk 1 (4 MiB chunks) plus a bit of chunk 2.
    used_before = os.fstat(fd).st_blocks
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 3 * MiB, 6 * MiB)
    want = data[:3 * MiB] + bytes(6 * MiB) + data[9 * MiB:]
    check(os.fstat(fd).st_size == 12 * MiB, "PUNCH_HOLE keeps the size")
    check(os.pread(fd, 12 * MiB, 0) == want, "PUNCH_HOLE: the punched range reads as zeros, the rest intact")
    check(os.fstat(fd).st_blocks < used_before, "PUNCH_HOLE frees the chunk it covers whole "
          f"(st_blocks {used_before} -> {os.fstat(fd).st_blocks})")
    expect_errno(errno.EOPNOTSUPP, lambda: fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), "PUNCH_HOLE without KEEP_SIZE")
    expect_errno(errno.EOPNOTSUPP, lambda: fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), "COLLAPSE_RANGE")
    expect_errno(errno.EINVAL, lambda: fallocate(fd, 0, 0, 0), "fallocate of length 0")
    os.posix_fallocate(fd, 30 * MiB, 1000)
    check(os.fstat(fd).st_size == 30 * MiB + 1000, "posix_fallocate past the end grows the file")
    os.close(fd)
    with open(p, "rb") as f:
        f.seek(12 * MiB)
        check(f.read() == bytes(18 * MiB + 1000), "the grown part reads as zeros after reopening")


def test_seek_data_hole():
    p = path("sparse")
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"a" * MiB, 8 * MiB)        # chunk 2 (4 MiB chunks)
    os.pwrite(fd, b"b" * 4096, 20 * MiB)      # chunk 5
    os.ftruncate(fd, 30 * MiB)
    check(os.lseek(fd, 0, os.SEEK_DATA) == 8 * MiB, "SEEK_DATA from 0 finds the first data at 8 MiB")
    check(os.lseek(fd, 8 * MiB + 5, os.SEEK_DATA) == 8 * MiB + 5, "SEEK_DATA inside data stays")
    check(os.lseek(fd, 8 * MiB, os.SEEK_HOLE) == 9 * MiB, "SEEK_HOLE from data finds its end at 9 MiB")
    check(os.lseek(fd, 0, os.SEEK_HOLE) == 0, "SEEK_HOLE in a hole stays")
    check(os.lseek(fd, 9 * MiB, os.SEEK_DATA) == 20 * MiB, "SEEK_DATA skips the hole to 20 MiB")
    check(os.lseek(fd, 20 * MiB, os.SEEK_HOLE) == 20 * MiB + 4096, "SEEK_HOLE after the second run")
    expect_errno(errno.ENXIO, lambda: os.lseek(fd, 21 * MiB, os.SEEK_DATA), "SEEK_DATA with only a hole after")
    check(os.lseek(fd, 25 * MiB, os.SEEK_HOLE) == 25 * MiB, "SEEK_HOLE in the trailing hole")
    expect_errno(errno.ENXIO, lambda: os.lseek(fd, 30 * MiB, os.SEEK_HOLE), "SEEK_HOLE at the end")
    full = path("full")
    with open(full, "wb") as f:
        f.write(os.urandom(9 * MiB))
    fd2 = os.open(full, os.O_RDONLY)
    check(os.lseek(fd2, 0, os.SEEK_HOLE) == 9 * MiB, "SEEK_HOLE of a dense file is its end")
    os.close(fd2)
    os.close(fd)


def test_copy_file_range():
    src, dst = path("cfr.src"), path("cfr.dst")
    data = os.urandom(5 * MiB + 123)
    with open(src, "wb") as f:
        f.write(data)
    fi, fo = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    copied = 0
    while copied < len(data):
        n = os.copy_file_range(fi, fo, len(data) - copied)
        check(n > 0, f"copy_file_range copied {n} bytes") if copied == 0 else None
        if n == 0:
            break
        copied += n
    os.close(fi)
    os.close(fo)
    with open(dst, "rb") as f:
        check(f.read() == data, "copy_file_range: the copy equals the source")
    fi, fo = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY)
    n = os.copy_file_range(fi, fo, 4096, 1000, 3 * MiB)
    os.close(fi)
    os.close(fo)
    with open(dst, "rb") as f:
        got = f.read()
    check(n == 4096 and got[3 * MiB:3 * MiB + 4096] == data[1000:5096] and len(got) == len(data),
          "copy_file_range with offsets writes just that range")


def renameat2(old, new, flags):
    if libc.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def test_renameat2():
    a, b = path("ren.a"), path("ren.b")
    for p, v in ((a, b"A"), (b, b"B")):
        with open(p, "wb") as f:
            f.write(v)
    expect_errno(errno.EEXIST, lambda: renameat2(a, b, RENAME_NOREPLACE), "RENAME_NOREPLACE onto an existing name")
    check(open(a, "rb").read() == b"A" and open(b, "rb").read() == b"B", "both files unchanged after the refusal")
    renameat2(a, b, RENAME_EXCHANGE)
    check(open(a, "rb").read() == b"B" and open(b, "rb").read() == b"A", "RENAME_EXCHANGE swaps the two files")
    d = path("ren.dir")
    os.mkdir(d)
    renameat2(d, a, RENAME_EXCHANGE)
    check(os.path.isdir(a) and open(d, "rb").read() == b"B", "RENAME_EXCHANGE swaps a directory and a file")
    expect_errno(errno.ENOENT, lambda: renameat2(path("ren.none"), b, RENAME_EXCHANGE), "RENAME_EXCHANGE with a missing source")
    expect_errno(errno.ENOENT, lambda: renameat2(b, path("ren.none"), RENAME_EXCHANGE), "RENAME_EXCHANGE with a missing target")
    renameat2(b, path("ren.c"), RENAME_NOREPLACE)
    check(not os.path.exists(b) and open(path("ren.c"), "rb").read() == b"A", "RENAME_NOREPLACE to a free name")
    expect_errno(errno.EINVAL, lambda: renameat2(d, path("ren.x"), RENAME_NOREPLACE | RENAME_EXCHANGE),
                 "RENAME_NOREPLACE|RENAME_EXCHANGE")


def _try_lock(p, kind, q):
    fd = os.open(p, os.O_RDWR)
    try:
        if kind == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 0)
        q.put("locked")
    except OSError as e:
        q.put(errno.errorcode.get(e.errno, str(e.errno)))
    finally:
        os.close(fd)


def other_process_lock(p, kind):
    q = multiprocessing.Queue()
    pr = multiprocessing.Process(target=_try_lock, args=(p, kind, q))
    pr.start()
    pr.join()
    return q.get()


def test_locks():
    p = path("locked")
    with open(p, "wb") as f:
        f.write(b"x" * 1000)
    fd = os.open(p, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    check(other_process_lock(p, "flock") in ("EWOULDBLOCK", "EAGAIN"), "flock: a second process cannot take LOCK_EX")
    fcntl.flock(fd, fcntl.LOCK_UN)
    check(other_process_lock(p, "flock") == "locked", "flock: free again after LOCK_UN")
    fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)
    check(other_process_lock(p, "fcntl") in ("EAGAIN", "EACCES"), "fcntl F_SETLK: an overlapping range is refused")
    fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0)
    check(other_process_lock(p, "fcntl") == "locked", "fcntl: free again after unlock")
    fcntl.lockf(fd, fcntl.LOCK_EX, 50, 500)  # [500, 550) does not overlap [0, 100)
    check(other_process_lock(p, "fcntl") == "locked", "fcntl: a disjoint range can be locked by another process")
    os.close(fd)


def test_mmap():
    p = path("mapped")
    size = 6 * MiB + 100
    data = bytearray(os.urandom(size))
    with open(p, "wb") as f:
        f.write(data)
    fd = os.open(p, os.O_RDWR)
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    check(m[:] == bytes(data), "mmap MAP_SHARED reads the file")
    rng = random.Random(5)
    for _ in range(200):
        off = rng.randrange(size - 64)
        chunk = os.urandom(rng.randrange(1, 64))
        m[off:off + len(chunk)] = chunk
        data[off:off + len(chunk)] = chunk
    check(os.pread(fd, size, 0) == bytes(data), "stores through a shared mapping are seen by read(2) at once")
    os.pwrite(fd, b"Z" * 10, 4 * MiB)
    data[4 * MiB:4 * MiB + 10] = b"Z" * 10
    check(m[4 * MiB:4 * MiB + 10] == b"Z" * 10, "write(2) is seen through the mapping")
    m.flush()
    m.close()
    os.close(fd)
    with open(p, "rb") as f:
        check(f.read() == bytes(data), "after msync and close the file holds every store")


def ns(t):
    return t.st_mtime_ns, t.st_ctime_ns


def test_timestamps():
    p = path("times")
    with open(p, "wb") as f:
        f.write(b"hello")
    s0 = os.stat(p)
    time.sleep(0.02)
    with open(p, "ab") as f:
        f.write(b"!")
    s1 = os.stat(p)
    check(s1.st_mtime_ns > s0.st_mtime_ns and s1.st_ctime_ns > s0.st_ctime_ns, "a write moves mtime and ctime")
    time.sleep(0.02)
    os.chmod(p, 0o600)
    s2 = os.stat(p)
    check(s2.st_ctime_ns > s1.st_ctime_ns and s2.st_mtime_ns == s1.st_mtime_ns, "chmod moves ctime, not mtime")
    os.utime(p, ns=(1_000_000_000, 2_000_000_000))
    s3 = os.stat(p)
    check((s3.st_atime_ns, s3.st_mtime_ns) == (1_000_000_000, 2_000_000_000), "utime sets atime and mtime exactly")
    with open(p, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        f.read()
    s4 = os.stat(p)
    check(s4.st_atime_ns > s3.st_mtime_ns, "a read moves an atime that is older than mtime (relatime)")
    check(s4.st_ctime_ns == s3.st_ctime_ns, "the atime update does not move ctime")
    d = path("tdir")
    os.mkdir(d)
    sd0 = os.stat(d)
    time.sleep(0.02)
    open(os.path.join(d, "x"), "wb").close()
    sd1 = os.stat(d)
    check(sd1.st_mtime_ns > sd0.st_mtime_ns and sd1.st_ctime_ns > sd0.st_ctime_ns, "creating an entry moves the directory's mtime and ctime")
    time.sleep(0.02)
    os.rename(os.path.join(d, "x"), os.path.join(d, "y"))
    sd2 = os.stat(d)
    check(sd2.st_mtime_ns > sd1.st_mtime_ns, "rename moves the directory's mtime")
    sl0 = os.stat(os.path.join(d, "y"))
    time.sleep(0.02)
    os.link(os.path.join(d, "y"), os.path.join(d, "z"))
    check(os.stat(os.path.join(d, "y")).st_ctime_ns > sl0.st_ctime_ns, "link moves the file's ctime")


def _appender(p, tag, count, size):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    for i in range(count):
        rec = f"{tag}:{i:06d}:".encode()
        os.write(fd, rec + b"." * (size - len(rec) - 1) + b"\n")
    os.close(fd)


def test_concurrent_appends():
    p = path("appended")
    open(p, "wb").close()
    procs = [multiprocessing.Process(target=_appender, args=(p, t, 400, 100 + 37 * t)) for t in range(4)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    with open(p, "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    check(len(lines) == 1600, f"4 processes x 400 O_APPEND records: {len(lines)} records")
    seen = {}
    intact = True
    for line in lines:
        tag, i, pad = line.split(b":", 2)
        t = int(tag)
        intact = intact and len(line) + 1 == 100 + 37 * t and pad == b"." * len(pad)
        intact = intact and seen.get(t, -1) + 1 == int(i)
        seen[t] = int(i)
    check(intact, "every record whole, none interleaved, each writer's in order")


def test_unlinked_open():
    p = path("ghost")
    data = os.urandom(5 * MiB)
    with open(p, "wb") as f:
        f.write(data)
    fd = os.open(p, os.O_RDWR)
    os.unlink(p)
    check(not os.path.exists(p), "the name is gone after unlink")
    check(os.pread(fd, len(data), 0) == data, "the open file still reads")
    os.pwrite(fd, b"more", len(data))
    check(os.fstat(fd).st_size == len(data) + 4 and os.fstat(fd).st_nlink == 0, "and can be written, nlink 0")
    os.close(fd)


for test in (test_fallocate, test_seek_data_hole, test_copy_file_range, test_renameat2, test_locks, test_mmap,
             test_timestamps, test_concurrent_appends, test_unlinked_open):
    print(f"[conformance] --- {test.__name__[5:]}", flush=True)
    test()
