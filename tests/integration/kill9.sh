#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kill -9 of the daemon at three moments (during a streaming write, idle after
# an unsynced write, during metadata churn): fsck clean, fsynced files intact,
# every surviving file readable and holding only written bytes or zeros.
source "$(dirname "$0")/lib.sh"
need sha256sum

head -c $((64 * MiB)) /dev/urandom >"$TMP/pattern"   # source of all unsynced data

cat >"$TMP/tool.py" <<'EOF'
import os, sys
cmd, path = sys.argv[1], sys.argv[2]
BLK = 1 << 20
def progress(n):
    with open(sys.argv[3] + ".tmp", "w") as f: f.write(str(n))
    os.rename(sys.argv[3] + ".tmp", sys.argv[3])
if cmd == "durable":            # durable PATH: 10 MiB, fsync file and directory
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, os.urandom(10 << 20)); os.fsync(fd); os.close(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY); os.fsync(dfd); os.close(dfd)
elif cmd == "stream":           # stream PATH PROGRESS PATTERN: 1 MiB blocks, no fsync, until killed
    pat = open(sys.argv[4], "rb").read()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(300):
        off = (i * BLK) % len(pat)
        os.write(fd, pat[off:off + BLK]); progress(i + 1)
    os.close(fd)
elif cmd == "churn":            # churn DIR PROGRESS: create, rename, unlink small files
    for i in range(100000):
        with open(f"{path}/tmp{i}", "wb") as f: f.write(str(i).encode() * 100)
        os.rename(f"{path}/tmp{i}", f"{path}/f{i}")
        if i >= 5: os.unlink(f"{path}/f{i - 5}")
        progress(i + 1)
elif cmd == "check-stream":     # check-stream PATH PATTERN: every 4 KiB block is pattern or zeros
    pat, data = open(sys.argv[3], "rb").read(), open(path, "rb").read()
    for off in range(0, len(data), 4096):
        got, p = data[off:off + 4096], off % len(pat)
        want = pat[p:p + len(got)]
        if got != want and got.count(0) != len(got):
            sys.exit(f"{path}: bytes at {off} are neither written data nor zeros")
elif cmd == "check-churn":      # check-churn DIR: each file holds its own bytes (or zeros)
    for name in os.listdir(path):
        want = name.lstrip("tmpf").encode() * 100
        got = open(f"{path}/{name}", "rb").read()
        if len(got) > len(want) or any(g != w and g != 0 for g, w in zip(got, want)):
            sys.exit(f"{path}/{name}: holds bytes that were never written to it")
EOF
tool() { python3 "$TMP/tool.py" "$@"; }
progress_at_least() { [[ -s "$1" ]] && (( $(cat "$1") >= $2 )); }

declare -A SHA=()
for round in 1 2 3; do
    case $round in
        1) moment="during a streaming write" ;;
        2) moment="idle, right after an unsynced write finished" ;;
        3) moment="during metadata churn and a streaming write" ;;
    esac
    log "=== round $round: kill -9 $moment"
    tool durable "$MNT/durable-$round" || fail "writing durable-$round failed"
    SHA[durable-$round]=$(sha256sum <"$MNT/durable-$round")
    ok "durable-$round written and fsynced"

    pids=()
    case $round in
        1) tool stream "$MNT/stream" "$TMP/progress" "$TMP/pattern" 2>>"$TMP/writers.log" & pids+=($!)
           wait_until "20 MiB streamed" progress_at_least "$TMP/progress" 20 ;;
        2) head -c $((5 * MiB + 123)) "$TMP/pattern" >"$MNT/unsynced" ;;
        3) mkdir "$MNT/churn"
           tool churn "$MNT/churn" "$TMP/churn-progress" 2>>"$TMP/writers.log" & pids+=($!)
           tool stream "$MNT/stream" "$TMP/progress" "$TMP/pattern" 2>>"$TMP/writers.log" & pids+=($!)
           wait_until "50 churn steps" progress_at_least "$TMP/churn-progress" 50
           wait_until "10 MiB streamed" progress_at_least "$TMP/progress" 10 ;;
    esac
    kill9_daemon
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done   # writers die with ENOTCONN (see writers.log)
    rm -f "$TMP/progress" "$TMP/churn-progress"
    ok "daemon killed, mount lazily unmounted"

    fsck_pool
    mount_pool
    for name in "${!SHA[@]}"; do
        assert_eq "$(sha256sum <"$MNT/$name")" "${SHA[$name]}" "sha256 of fsynced $name"
    done
    find "$MNT" -type f -print0 | xargs -0 -r cat >/dev/null || fail "a surviving file does not read back"
    ok "every surviving file ($(find "$MNT" -type f | wc -l)) reads without error"
    [[ ! -e "$MNT/stream" ]] || tool check-stream "$MNT/stream" "$TMP/pattern" || fail "garbage in the unsynced stream file"
    [[ ! -e "$MNT/unsynced" ]] || tool check-stream "$MNT/unsynced" "$TMP/pattern" || fail "garbage in the unsynced file"
    [[ ! -e "$MNT/churn" ]] || tool check-churn "$MNT/churn" || fail "garbage in a churned file"
    ok "unsynced files hold only data written to them, or zeros"
    rm -rf "$MNT/stream" "$MNT/unsynced" "$MNT/churn"
done

unmount_pool
fsck_pool

log "--- SIGTERM while a process holds a file open"
# The daemon must exit (unmounting lazily) even though the open file keeps the
# kernel connection alive; its workers were left blocked in read(2) before.
mount_pool
head -c $((3 * MiB)) /dev/urandom >"$MNT/held"
held_sum=$(sha256sum <"$MNT/held")
sync "$MNT/held"
sleep 600 <"$MNT/held" &
holder=$!  # teardown kills it too if this test fails first
pid=$(daemon_pid)
kill -TERM "$pid"
wait_pid_gone "$pid" || fail "daemon $pid did not exit on SIGTERM while $MNT/held was open"
ok "daemon exited on SIGTERM with a file held open"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
! mountpoint -q "$MNT" || fusermount3 -u "$MNT" 2>/dev/null || true
fsck_pool
mount_pool
assert_eq "$(sha256sum <"$MNT/held")" "$held_sum" "sha256 of the held file after remount"
unmount_pool
