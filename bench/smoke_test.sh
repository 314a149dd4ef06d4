#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Smoke test of latency_bench, ycsb_bench or sqlite_bench.py (ctest label
# "bench"): runs the benchmark with tiny sizes in a private directory on
# /dev/shm and checks that its output has every expected row and column
# (check_bench_output.py). No timing is checked: benchmarks measure, tests
# check. sqlite runs only the raw and stripefs targets (mergerfs may not be
# installed), one run of 1 s each; its own integrity and row-count checks
# fail it (exit 4) if they do not hold; with TMPDIR=$dir its mount points
# are under $dir too, where the trap below looks.
#
#   smoke_test.sh latency|ycsb|sqlite BENCH STRIPEFS_BINARY
#
# The benchmark cleans up after itself, also on SIGTERM (which `timeout`
# sends it first). Should it crash or be killed, the EXIT trap here unmounts
# whatever is still mounted under the private directory, waits for the
# daemons it started (pids from their META/daemon.pid; killed only if they do
# not exit) and removes the directory.
set -euo pipefail

kind=$1 bench=$2
export STRIPEFS=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /dev/shm/stripefs-bench-smoke.XXXXXX)

pid_alive() {  # a zombie counts as dead
    local state
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n "$state" && "$state" != Z ]]
}

cleanup() {
    local rc=$? m pidfile pid i
    set +e
    trap - EXIT
    # Deepest first, so nested mounts come off before their parents.
    while read -r m; do
        umount "$m" 2>/dev/null || { sleep 0.5; umount "$m" 2>/dev/null; } || umount -l "$m"
        echo "smoke_test: cleanup: unmounted $m left by the benchmark" >&2
        ((rc != 0)) || rc=1
    done < <(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    while read -r pidfile; do
        pid=$(tr -dc 0-9 <"$pidfile")
        [[ -n "$pid" ]] || continue
        for ((i = 0; i < 300; i++)); do pid_alive "$pid" || break; sleep 0.1; done
        if pid_alive "$pid"; then
            echo "smoke_test: cleanup: daemon $pid still running after its unmount; kill -9" >&2
            kill -9 "$pid"
            ((rc != 0)) || rc=1
        fi
    done < <(find "$dir" -name daemon.pid 2>/dev/null)
    if awk -v d="$dir/" 'index($5, d) == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
        echo "smoke_test: cleanup: a mount is still under $dir; not removing it" >&2
    else
        rm -rf --one-file-system "$dir"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $kind in
    latency) cmd=("$bench" --smoke --dir "$dir") ;;
    ycsb) cmd=("$bench" --records 2000 --operations 2000 --dir "$dir") ;;
    sqlite) cmd=(env TMPDIR="$dir" python3 "$bench" --targets raw,stripefs --runs 1 --runtime 1 --tmpfs-dir "$dir"
                 --stripefs "$STRIPEFS") ;;
    *) echo "usage: $0 latency|ycsb|sqlite BENCH STRIPEFS" >&2; exit 2 ;;
esac

# --kill-after: a benchmark that ignores TERM is killed, and the trap still cleans up.
status=0
timeout --kill-after=10 50 "${cmd[@]}" --json "$dir/out.json" >"$dir/out.md" 2>"$dir/err.txt" \
    || status=$?
if ((status != 0)); then
    echo "smoke_test: $bench exited with $status" >&2
    tail -n 20 "$dir/err.txt" >&2
    exit 1
fi
python3 "$here/check_bench_output.py" "$kind" "$dir/out.md" "$dir/out.json"
# The benchmark removes its own work directory: nothing of it may be left.
leftover=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name out.md ! -name out.json ! -name err.txt)
if [[ -n "$leftover" ]]; then
    echo "smoke_test: the benchmark left $leftover behind" >&2
    exit 1
fi
echo "smoke_test: $kind: output complete"
