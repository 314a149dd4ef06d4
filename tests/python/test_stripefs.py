# SPDX-License-Identifier: Apache-2.0
# The Python module `stripefs` on a real pool: drive files formatted by the
# stripefs binary, RocksDB metadata, io_uring I/O. Run by ctest as
# python.stripefs, with PYTHONPATH at the built module and STRIPEFS the binary.
import errno
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stripefs

STRIPEFS = os.environ["STRIPEFS"]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def mkfs(tmp_path, drive_size="256M", ram="64M"):
    meta = tmp_path / "meta"
    drives = []
    for i in range(3):
        drives += ["--drive", f"{tmp_path}/drive{i}.img:{drive_size}"]
    subprocess.run([STRIPEFS, "mkfs", "--meta", str(meta), *drives, "--ram", ram, "--chunk-size", "1M"],
                   check=True, stdout=subprocess.DEVNULL)
    return str(meta)


@pytest.fixture
def meta(tmp_path):
    return mkfs(tmp_path)


@pytest.fixture
def pool(meta):
    with stripefs.Pool.open(meta) as p:
        yield p


def random_bytes(n, seed=1):
    return random.Random(seed).randbytes(n)


# 100 B and 64 KiB go through the write-back buffer; 1 MiB and 5 MiB past it
# to the drives, across chunks.
SIZES = [0, 100, 64 << 10, 1 << 20, (5 << 20) + 3]


@pytest.mark.parametrize("n", SIZES)
def test_put_get_read_size(pool, n):
    data = random_bytes(n, n)
    uri = pool.put("/models/a//obj.bin", data)
    assert uri.startswith("stripefs://")
    assert pool.get("models/a/obj.bin") == data
    assert pool.get(uri) == data, "by URI"
    assert pool.size("models/a/obj.bin") == n
    assert pool.read("models/a/obj.bin", n // 3, 1000) == data[n // 3:n // 3 + 1000]
    assert pool.read("models/a/obj.bin", n + 5, 10) == b"", "past the end"
    pool.sync()
    assert pool.get("models/a/obj.bin") == data, "once stored"


def test_put_takes_any_bytes_like(pool):
    pool.put("b", bytearray(b"from a bytearray"))
    pool.put("m", memoryview(b"xxfrom a memoryview")[2:])
    pool.put("n", np.arange(1000, dtype=np.uint32))
    assert pool.get("b") == b"from a bytearray"
    assert pool.get("m") == b"from a memoryview"
    assert np.array_equal(np.frombuffer(pool.get("n"), dtype=np.uint32), np.arange(1000, dtype=np.uint32))


@pytest.mark.parametrize("n", [100, 1 << 20])
def test_get_into_and_read_into_fill_the_callers_buffer(pool, n):
    data = random_bytes(n, 7)
    pool.put("obj", data)
    out = bytearray(n + 16)
    assert pool.get_into("obj", out) == n
    assert bytes(out[:n]) == data and out[n:] == bytearray(16), "nothing past the object is written"
    arr = np.zeros(n, dtype=np.uint8)
    assert pool.get_into("obj", arr) == n
    assert arr.tobytes() == data
    view = memoryview(out)[10:60]
    assert pool.read_into("obj", 5, view) == 50
    assert bytes(view) == data[5:55]
    assert pool.read_into("obj", n - 3, bytearray(100)) == 3, "short at the end"


def test_append_list_remove_multi_get(pool):
    pool.put("d/one", b"1")
    pool.append("d/one", b"+more")
    pool.append("d/two", b"2")
    assert pool.get("d/one") == b"1+more"
    assert pool.list("d") == ["one", "two"]
    assert pool.list() == ["d"]
    assert pool.multi_get(["d/one", "d/none", "d/two"]) == [b"1+more", None, b"2"]
    pool.remove("d/one")
    assert pool.list("d") == ["two"]
    stats = pool.stats()
    assert stats["puts"] == 1 and stats["appends"] == 2 and stats["removes"] == 1
    assert stats["gets"] >= 3 and stats["not_found"] >= 1
    assert pool.path == "in-process"


def test_objects_survive_close_and_reopen(meta):
    data = random_bytes(3 << 20, 9)
    with stripefs.Pool.open(meta) as p:
        p.put("keep/big", data)
        p.put("keep/small", b"small")  # still in the write-back buffer: close stores it
    with stripefs.Pool.open(meta, ram_cache="off") as p:
        assert p.get("keep/big") == data
        assert p.get("keep/small") == b"small"


def test_errors_are_oserrors_with_errno(pool, meta, tmp_path):
    pool.put("file", b"x")
    pool.put("dir/x", b"x")
    with pytest.raises(FileNotFoundError) as e:
        pool.get("nothing/here")
    assert e.value.errno == errno.ENOENT and "nothing" in str(e.value)
    with pytest.raises(FileNotFoundError):
        pool.size("nothing")
    with pytest.raises(FileNotFoundError):
        pool.read_into("nothing", 0, bytearray(4))
    with pytest.raises(FileNotFoundError):
        pool.remove("nothing")
    with pytest.raises(NotADirectoryError):
        pool.put("file/below", b"x")
    with pytest.raises(IsADirectoryError):
        pool.get("dir")
    with pytest.raises(OSError) as e:
        pool.put("", b"x")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        pool.get("n" * 300)
    assert e.value.errno == errno.ENAMETOOLONG
    with pytest.raises(OSError) as e:
        stripefs.Pool.open(meta)
    assert e.value.errno == errno.EBUSY, "the pool is open already"
    with pytest.raises(FileNotFoundError):
        stripefs.Pool.open(str(tmp_path / "no-pool"))
    with pytest.raises(OSError) as e:
        stripefs.Pool.open(meta, ram_cache="fifo")
    assert e.value.errno == errno.EINVAL and "fifo" in str(e.value)


def test_a_full_pool_raises_enospc_and_keeps_what_was_stored(tmp_path):
    meta = mkfs(tmp_path, drive_size="16M", ram="8M")
    first = random_bytes(4 << 20, 3)
    with stripefs.Pool.open(meta) as p:
        p.put("first", first)
        with pytest.raises(OSError) as e:
            for i in range(40):
                p.put(f"fill{i}", random_bytes(4 << 20, i))
        assert e.value.errno == errno.ENOSPC
        assert p.get("first") == first


def test_wrong_buffers(pool):
    pool.put("obj", b"0123456789")
    with pytest.raises(ValueError, match="10 bytes; the buffer holds 4"):
        pool.get_into("obj", bytearray(4))
    with pytest.raises(BufferError):
        pool.get_into("obj", b"read-only bytes......")
    with pytest.raises(TypeError):
        pool.read_into("obj", 0, "a str is no buffer")
    with pytest.raises(TypeError):
        pool.put("obj", "a str is no buffer")
    # Not contiguous: each exporter says so its own way.
    with pytest.raises(ValueError, match="not C-contiguous"):
        pool.read_into("obj", 0, np.zeros((4, 4), dtype=np.uint8)[:, 1])
    with pytest.raises(BufferError):
        pool.read_into("obj", 0, memoryview(bytearray(16))[::2])
    assert pool.get("obj") == b"0123456789", "nothing changed"


def test_a_closed_pool_raises_valueerror(meta):
    p = stripefs.Pool.open(meta)
    p.put("x", b"x")
    p.close()
    assert p.closed
    with pytest.raises(ValueError, match="closed"):
        p.get("x")
    p.close()  # a second close does nothing
    with stripefs.Pool.open(meta) as again:
        assert again.get("x") == b"x"


def test_concurrent_threads(pool):
    errors = []

    def worker(t):
        try:
            for i in range(50):
                data = random_bytes(1000 + 4096 * (i % 5), t * 1000 + i)
                pool.put(f"t{t}/o{i}", data)
                assert pool.get(f"t{t}/o{i}") == data
                out = bytearray(len(data))
                assert pool.get_into(f"t{t}/o{i}", out) == len(data) and out == data
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(pool.list("t2")) == 50


def test_the_gil_is_released_during_io(pool):
    # With a switch interval of 1000 s the interpreter never takes the GIL
    # from a thread; it passes only when its holder lets go. So the counting
    # thread, which lets go after each count, counts while the main thread
    # reads only if the reads let go of it.
    pool.put("big", random_bytes(8 << 20, 2))
    pool.sync()
    counted = 0
    done = False

    def count():
        nonlocal counted
        while not done:
            counted += 1
            time.sleep(0)  # lets go of the GIL

    out = bytearray(8 << 20)
    interval = sys.getswitchinterval()
    t = threading.Thread(target=count)
    t.start()
    sys.setswitchinterval(1000)
    try:
        time.sleep(0.01)  # the counter now waits for the GIL
        before = counted
        for _ in range(8):
            pool.get_into("big", out)
        during = counted - before
    finally:
        done = True
        sys.setswitchinterval(interval)
        t.join()
    assert during > 0, "no count while the pool read: the reads held the GIL"


class Mount:
    """A real stripefs mount of meta at tmp_path/mnt, unmounted (and its daemon gone) on exit."""

    def __init__(self, meta, tmp_path, *options):
        self.meta, self.mnt = meta, tmp_path / "mnt"
        self.mnt.mkdir(exist_ok=True)
        self.state = tmp_path / "state" if options else meta
        args = ["-o", ",".join(options)] if options else []
        subprocess.run(["timeout", "60", STRIPEFS, "mount", meta, str(self.mnt), *args], check=True)
        # Read before the unmount: the daemon removes its pid file as it exits.
        self.daemon = int((Path(self.state) / "daemon.pid").read_text().strip())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        subprocess.run(["timeout", "60", "fusermount3", "-u", str(self.mnt)], check=True)
        for _ in range(600):  # the daemon stores, closes the pool and exits after the unmount
            try:
                os.kill(self.daemon, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(self.daemon, 9)
        pytest.fail(f"the daemon {self.daemon} did not exit within 60 s of the unmount")


def test_a_mounted_pool_is_reached_through_its_daemon(meta, tmp_path):
    with Mount(meta, tmp_path) as m:
        pool = stripefs.Pool.open(meta)  # kept open past the unmount
        assert pool.path == "daemon"
        # The mount's writes, through the channel.
        (m.mnt / "dir").mkdir()
        (m.mnt / "dir" / "from-the-mount").write_bytes(b"written through the mount")
        assert pool.get("dir/from-the-mount") == b"written through the mount"
        assert pool.list("dir") == ["from-the-mount"]
        # The channel's writes, through the mount: a name the kernel had
        # looked up as missing, and a file whose pages it had cached.
        assert not (m.mnt / "dir" / "new").exists()
        pool.put("dir/new", b"put through the channel")
        assert (m.mnt / "dir" / "new").read_bytes() == b"put through the channel"
        pool.put("dir/from-the-mount", b"replaced")
        assert (m.mnt / "dir" / "from-the-mount").read_bytes() == b"replaced"
        pool.append("dir/from-the-mount", b", then appended")
        assert (m.mnt / "dir" / "from-the-mount").read_bytes() == b"replaced, then appended"
        assert os.stat(m.mnt / "dir" / "from-the-mount").st_size == len(b"replaced, then appended")
        pool.put("a/b/c/deep", b"directories made on the way")
        assert (m.mnt / "a" / "b" / "c" / "deep").read_bytes() == b"directories made on the way"
        # Larger than the shared region's first 4 MiB: it grows; both ways byte for byte.
        big = random_bytes((9 << 20) + 5, 3)
        pool.put("big", big)
        assert (m.mnt / "big").read_bytes() == big
        assert pool.get("big") == big
        out = np.zeros(len(big), dtype=np.uint8)
        assert pool.get_into("big", out) == len(big) and out.tobytes() == big
        assert pool.read("big", 7 << 20, 100) == big[7 << 20:(7 << 20) + 100]
        assert pool.size("big") == len(big)
        assert pool.multi_get(["big", "nothing", "dir/new"]) == [big, None, b"put through the channel"]
        # Into memory shared with the daemon, which fills it itself.
        shared = pool.buffer(16 << 20)
        assert len(shared) == 16 << 20
        assert pool.get_into("big", shared) == len(big)
        assert bytes(memoryview(shared)[:len(big)]) == big
        halves = np.frombuffer(shared, dtype=np.float16)
        assert pool.read_into("big", 0, halves[1000:2000]) == 2000
        assert halves[1000:2000].tobytes() == big[:2000]
        assert pool.stats()["puts"] >= 3
        pool.sync()
        # Errors arrive as they do in-process.
        with pytest.raises(FileNotFoundError):
            pool.get("dir/none")
        with pytest.raises(IsADirectoryError):
            pool.get("dir")
        with pytest.raises(NotADirectoryError):
            pool.put("big/under-a-file", b"x")
        with pytest.raises(ValueError):
            pool.get_into("big", bytearray(10))
        # A removed object the mount holds open stays readable through the
        # open handle, and is gone by name at once.
        with open(m.mnt / "dir" / "new", "rb") as held:
            pool.remove("dir/new")
            assert not (m.mnt / "dir" / "new").exists()
            assert held.read() == b"put through the channel"
        with pytest.raises(FileNotFoundError):
            pool.get("dir/new")
        # Threads share the one connection.
        def worker(i):
            for j in range(20):
                pool.put(f"t/{i}/{j}", random_bytes(5000, i * 100 + j))
                assert pool.get(f"t/{i}/{j}") == random_bytes(5000, i * 100 + j)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(os.listdir(m.mnt / "t" / "2")) == sorted(str(j) for j in range(20))
        # The KV-cache example on the mounted pool, through the channel.
        from kv_cache_backend import KVCacheBackend
        kv = np.random.default_rng(5).standard_normal((2, 8, 64)).astype(np.float16)
        with KVCacheBackend(meta) as cache:
            cache.put("req1/layer0", kv)
            assert cache.get("req1/layer0").tobytes() == kv.tobytes()
        assert (m.mnt / "kv" / "req1" / "layer0").stat().st_size > kv.nbytes, "the mount shows the object"
    # Unmounted: the daemon closed the channel, the next call says so.
    with pytest.raises(BrokenPipeError):
        pool.get("big")
    pool.close()
    with stripefs.Pool.open(meta) as p:
        assert p.path == "in-process"
        assert p.get("big") == big
        assert p.get("dir/from-the-mount") == b"replaced, then appended"
        assert p.list("t/3") == sorted(str(j) for j in range(20))


def test_a_pool_mounted_with_its_state_elsewhere_needs_the_socket_named(meta, tmp_path):
    with Mount(meta, tmp_path, f"state={tmp_path / 'state'}") as m:
        with pytest.raises(OSError) as e:
            stripefs.Pool.open(meta)
        assert e.value.errno == errno.EBUSY
        assert "channel_socket" in str(e.value), "the message says how to reach it"
        with stripefs.Pool.open(meta, channel_socket=str(m.state / "objects.sock")) as pool:
            assert pool.path == "daemon"
            pool.put("x", b"through the named socket")
            assert (m.mnt / "x").read_bytes() == b"through the named socket"


def test_kv_cache_backend_example(meta):
    from kv_cache_backend import KVCacheBackend

    chunks = {f"layer{l}/chunk{c}": np.random.default_rng(l * 10 + c).standard_normal((2, 16, 64)).astype(np.float16)
              for l in range(3) for c in range(4)}
    with KVCacheBackend(meta) as cache:
        assert not cache.contains("layer0/chunk0")
        for key, tensor in chunks.items():
            cache.put(key, tensor)
        assert cache.contains("layer0/chunk0")
        got = cache.get("layer1/chunk2")
        assert got.dtype == np.float16 and got.shape == (2, 16, 64)
        assert got.tobytes() == chunks["layer1/chunk2"].tobytes()
        batch = cache.batched_get(["layer2/chunk3", "missing", "layer0/chunk1"])
        assert batch[1] is None
        assert batch[0].tobytes() == chunks["layer2/chunk3"].tobytes()
        assert batch[2].tobytes() == chunks["layer0/chunk1"].tobytes()
    with KVCacheBackend(meta) as cache:  # byte for byte after a reopen
        for key, tensor in chunks.items():
            assert cache.get(key).tobytes() == tensor.tobytes()


def test_the_readme_python_example_runs(meta):
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    start = readme.index("```python\n", readme.index("**Python.**")) + len("```python\n")
    code = readme[start:readme.index("```", start)]
    exec(compile(code.replace("/srv/pool/meta", meta), "README.md", "exec"), {})
    with stripefs.Pool.open(meta) as p:
        assert p.size("kv/req42/layer0") == 2 * 16 * 64 * 2
