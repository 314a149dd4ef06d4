#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Files grown by many small appends (reopen each time, one open fd, two
# interleaved O_APPEND fds, bash >>) equal references built outside the mount,
# before and after remount.
source "$(dirname "$0")/lib.sh"
need cmp

# appender MODE FILE: deterministic appends of 1..300 bytes (seeded PRNG).
appender() {
    python3 - "$1" "$2" <<'EOF_PY'
import os, random, sys
mode, path = sys.argv[1], sys.argv[2]
rng = random.Random(1234)
flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
expect = 0
if mode == "reopen":            # 10,000 open/write/close cycles
    for i in range(10000):
        data = rng.randbytes(rng.randint(1, 300))
        fd = os.open(path, flags, 0o644)
        assert os.write(fd, data) == len(data)
        os.close(fd)
        expect += len(data)
        if i % 1000 == 999 and os.stat(path).st_size != expect:
            sys.exit(f"after {i + 1} appends size is {os.stat(path).st_size}, expected {expect}")
elif mode == "once":            # one fd, 10,000 writes
    fd = os.open(path, flags, 0o644)
    for i in range(10000):
        data = rng.randbytes(rng.randint(1, 300))
        assert os.write(fd, data) == len(data)
        expect += len(data)
    os.close(fd)
elif mode == "twofds":          # two O_APPEND fds used alternately never overwrite each other
    a, b = os.open(path, flags, 0o644), os.open(path, flags, 0o644)
    for i in range(5000):
        for fd in (a, b):
            data = rng.randbytes(rng.randint(1, 300))
            assert os.write(fd, data) == len(data)
            expect += len(data)
    os.close(a); os.close(b)
if os.stat(path).st_size != expect:
    sys.exit(f"{mode}: final size {os.stat(path).st_size}, expected {expect}")
EOF_PY
}

bash_appends() {  # 2,000 appends through the shell's >> (open+O_APPEND per line)
    local i
    for ((i = 0; i < 2000; i++)); do printf 'line %d %*s\n' "$i" $((i % 97)) x >>"$1"; done
}

mkdir "$MNT/ap" "$TMP/ref"
for mode in reopen once twofds; do
    appender "$mode" "$TMP/ref/$mode" || fail "building reference ($mode) failed"
    appender "$mode" "$MNT/ap/$mode" || fail "appends ($mode) on the mount failed"
done
bash_appends "$TMP/ref/bash"
bash_appends "$MNT/ap/bash"

check() {  # check WHEN
    local f
    for f in reopen once twofds bash; do
        cmp "$TMP/ref/$f" "$MNT/ap/$f" || fail "$f: file on the mount differs from reference ($1)"
        ok "$f appends: $(stat -c %s "$MNT/ap/$f") bytes identical to reference ($1)"
    done
}
check "live"
remount_pool
log "remounted"
check "after remount"

# Appending after the remount continues at the end.
appender reopen "$TMP/ref/reopen2" || fail "building second reference failed"
cat "$TMP/ref/reopen2" >>"$TMP/ref/reopen"
cat "$TMP/ref/reopen2" >>"$MNT/ap/reopen"
cmp "$TMP/ref/reopen" "$MNT/ap/reopen" || fail "append after remount differs"
ok "appending after remount continues at the end"
