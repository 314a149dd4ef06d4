# SPDX-License-Identifier: Apache-2.0
# Shared fixture for the stripefs integration tests. Source it first thing:
#
#     source "$(dirname "$0")/lib.sh"
#
# On load it makes a temp dir, creates a pool of $NDRIVES drive files of
# $DRIVE_SIZE each plus a $RAM_SIZE RAM segment, and mounts it at $MNT.
# Set these before sourcing to change that:
#   NDRIVES (4)  DRIVE_SIZE (256M)  RAM_SIZE (64M, empty = no RAM segment)
#   CHUNK_SIZE (empty = the default)  MOUNT_OPTS (array, e.g. (-o allow_other))
#   NO_DEFAULT_POOL=1  only make the temp dir; the test builds its own pools.
#   DAEMON_STATE  the daemon's state directory (-o state=, its pid file and log);
#     empty = the metadata directory, as the daemon's default is. A pool whose
#     META is an etcd:// address sets it.
#   STRIPEFS_TRANSPORT=uring|dev  mount_pool mounts with -o transport=...; for
#     uring the kernel's enable_uring is turned on for the test (and restored).
# An EXIT trap unmounts every pool this script mounted, waits for the daemons
# to exit and removes the temp dir, whether the test passed or failed.

set -euo pipefail

STRIPEFS=${STRIPEFS:-/work/main/build/tools/stripefs}
TEST_NAME=$(basename "$0" .sh)
NDRIVES=${NDRIVES:-4}
DRIVE_SIZE=${DRIVE_SIZE:-256M}
RAM_SIZE=${RAM_SIZE-64M}
CHUNK_SIZE=${CHUNK_SIZE:-}
[[ -v MOUNT_OPTS ]] || MOUNT_OPTS=()
TRANSPORT=${STRIPEFS_TRANSPORT:-}
ENABLE_URING=/sys/module/fuse/parameters/enable_uring
URING_WAS=  # enable_uring's value before this test turned it on
MiB=$((1024 * 1024))

log()  { echo "[$TEST_NAME] $*"; }
ok()   { echo "[$TEST_NAME]   ok: $*"; }
fail() { echo "[$TEST_NAME] FAIL: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || fail "required tool '$1' is not installed (the Makefile should install it)"; }

# assert_eq ACTUAL EXPECTED WHAT
assert_eq() { [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"; ok "$3 = $2"; }

# json EXPR: read one JSON document on stdin, bind it to `d`, print EXPR's value
# (booleans as true/false, lists/dicts as JSON).
json() {
    python3 -c '
import json, sys
d = json.load(sys.stdin)
r = eval(sys.argv[1])
if isinstance(r, bool): print(str(r).lower())
elif isinstance(r, (dict, list)): print(json.dumps(r))
else: print(r)' "$1"
}

# expect_errno ERRNO_NAME PYTHON_CODE [ARGS...]: the code (run with os, errno,
# ctypes imported and the ARGS in argv[1:]) must raise OSError with that errno.
expect_errno() {
    local name=$1 code=$2; shift 2
    python3 - "$name" "$code" "$@" <<'EOF' || fail "expected $name from: $code"
import ctypes, errno, os, sys
name, code = sys.argv[1], sys.argv[2]
sys.argv = [sys.argv[0]] + sys.argv[3:]
try:
    exec(code)
except OSError as e:
    if e.errno == getattr(errno, name):
        sys.exit(0)
    print(f"expected {name}, got {errno.errorcode.get(e.errno, e.errno)}: {e}", file=sys.stderr)
    sys.exit(1)
print(f"expected {name}, but the operation succeeded", file=sys.stderr)
sys.exit(1)
EOF
    code=${code#$'\n'}
    ok "$name from: ${code//$'\n'/; }"
}

# wait_until WHAT CMD...: retry CMD until it succeeds. Only for state that the
# kernel settles asynchronously (FUSE sends RELEASE after close(2) returns);
# the bound is a hang guard, not a timing assertion.
wait_until() {
    local what=$1 i; shift
    for ((i = 0; i < 300; i++)); do
        if "$@"; then return 0; fi
        sleep 0.1
    done
    fail "gave up waiting for: $what"
}

pid_alive() {  # a zombie counts as dead
    local state
    [[ -r /proc/$1/stat ]] || return 1
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n "$state" && "$state" != Z ]]
}

wait_pid_gone() {
    local i
    for ((i = 0; i < 600; i++)); do
        pid_alive "$1" || return 0
        sleep 0.1
    done
    return 1
}

daemon_pid() {  # daemon_pid [DAEMON_STATE or META]
    local f=${1:-${DAEMON_STATE:-$META}}/daemon.pid pid
    [[ -s "$f" ]] || fail "no daemon pid file $f"
    pid=$(tr -dc 0-9 <"$f")
    [[ -n "$pid" ]] || fail "daemon pid file $f holds no pid"
    echo "$pid"
}

# --- pool lifecycle ---------------------------------------------------------
# The current pool is described by META, MNT and the DRIVES array; tests that
# juggle several pools set those globals before calling these helpers.

TMP=$(mktemp -d /tmp/stripefs-it.XXXXXX)
META=$TMP/meta
MNT=$TMP/mnt
DRIVES=()
DAEMON_STATE=${DAEMON_STATE:-}
MOUNTED=()   # "DAEMON_STATE|MNT" of every pool mounted by this script (DAEMON_STATE: where its daemon.pid is)
CLEANUP_HOOKS=()  # commands teardown runs after unmounting (e.g. detach loop devices)
BEFORE_UNMOUNT_HOOKS=()  # commands teardown runs first (e.g. unmount an overlay over a pool)

teardown() {
    local rc=$? entry m mnt pid still_mounted=0
    set +e
    trap - EXIT
    cd /   # a cwd inside the mount would keep it busy
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
    wait 2>/dev/null
    for hook in "${BEFORE_UNMOUNT_HOOKS[@]}"; do $hook; done
    if ((rc != 0)); then  # a failure's cause is often in the daemon's log, which goes with $TMP
        for entry in "${MOUNTED[@]}"; do
            m=${entry%%|*}
            [[ -s "$m/stripefs.log" ]] || continue
            echo "[$TEST_NAME] the last lines of $m/stripefs.log:" >&2
            tail -n 40 "$m/stripefs.log" | sed "s/^/[$TEST_NAME]   | /" >&2
        done
    fi
    for entry in "${MOUNTED[@]}"; do
        m=${entry%%|*} mnt=${entry#*|}
        pid=$(tr -dc 0-9 2>/dev/null <"$m/daemon.pid")
        if mountpoint -q "$mnt"; then
            fusermount3 -u "$mnt" 2>/dev/null || sleep 0.5
            mountpoint -q "$mnt" && { fusermount3 -u "$mnt" 2>/dev/null \
                || fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt"; }
        fi
        if [[ -n "$pid" ]] && ! wait_pid_gone "$pid"; then
            echo "[$TEST_NAME] teardown: daemon $pid did not exit after unmount; kill -9" >&2
            kill -9 "$pid" 2>/dev/null; wait_pid_gone "$pid"
            ((rc != 0)) || rc=1
        fi
        mountpoint -q "$mnt" && still_mounted=1
    done
    for hook in "${CLEANUP_HOOKS[@]}"; do $hook; done
    if ((still_mounted)); then
        echo "[$TEST_NAME] teardown: a mount is still present under $TMP; not removing it" >&2
    else
        rm -rf --one-file-system "$TMP"
    fi
    [[ -n "$URING_WAS" ]] && echo "$URING_WAS" >"$ENABLE_URING"
    if ((rc == 0)); then echo "[$TEST_NAME] PASS"; else echo "[$TEST_NAME] FAILED (exit $rc)" >&2; fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# mkfs_pool [EXTRA MKFS ARGS...]: a fresh pool at META with NDRIVES drive files
# (DRIVES is filled in when empty).
mkfs_pool() {
    local args=() i
    if ((${#DRIVES[@]} == 0)); then
        for ((i = 0; i < NDRIVES; i++)); do DRIVES+=("$TMP/drive$i.img"); done
    fi
    for i in "${DRIVES[@]}"; do args+=(--drive "$i:$DRIVE_SIZE"); done
    [[ -n "$RAM_SIZE" ]] && args+=(--ram "$RAM_SIZE")
    [[ -n "$CHUNK_SIZE" ]] && args+=(--chunk-size "$CHUNK_SIZE")
    "$STRIPEFS" mkfs --meta "$META" "${args[@]}" "$@" >/dev/null \
        || fail "stripefs mkfs --meta $META ${args[*]} $* failed"
}

mount_pool() {
    mkdir -p "$MNT"
    ! mountpoint -q "$MNT" || fail "$MNT is already mounted"
    [[ " ${MOUNTED[*]} " == *" ${DAEMON_STATE:-$META}|$MNT "* ]] || MOUNTED+=("${DAEMON_STATE:-$META}|$MNT")  # for teardown
    local opts=("${MOUNT_OPTS[@]}") i transport=
    [[ -z "$DAEMON_STATE" ]] || opts+=(-o "state=$DAEMON_STATE")
    [[ -z "$TRANSPORT" ]] || opts+=(-o "transport=$TRANSPORT")
    "$STRIPEFS" mount "$META" "$MNT" "${opts[@]}" || fail "stripefs mount $META $MNT failed"
    mountpoint -q "$MNT" || fail "stripefs mount returned but $MNT is not a mountpoint"
    pid_alive "$(daemon_pid)" || fail "daemon pid in ${DAEMON_STATE:-$META}/daemon.pid is not running"
    if [[ "$TRANSPORT" == uring ]]; then  # the ring threads register just after INIT
        for ((i = 0; i < 100; i++)); do
            transport=$("$STRIPEFS" stats "$MNT" --json | json 'd["transport"]')
            [[ "$transport" == uring ]] && break
            sleep 0.05
        done
        [[ "$transport" == uring ]] || fail "mounted with -o transport=uring, but the requests come through $transport"
    fi
}

unmount_pool() {
    local pid i
    pid=$(daemon_pid)
    for ((i = 0; i < 50; i++)); do  # EBUSY while the kernel finishes releasing files
        fusermount3 -u "$MNT" 2>/dev/null && break
        sleep 0.2
    done
    ! mountpoint -q "$MNT" || fail "could not unmount $MNT: $(fusermount3 -u "$MNT" 2>&1)"
    wait_pid_gone "$pid" || fail "daemon $pid still running after unmount of $MNT"
}

remount_pool() { unmount_pool; mount_pool; }

kill9_daemon() {
    local pid
    pid=$(daemon_pid)
    kill -9 "$pid"
    wait_pid_gone "$pid" || fail "daemon $pid survived kill -9"
    fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" || fail "could not lazy-unmount $MNT"
    ! mountpoint -q "$MNT" || fail "$MNT still mounted after lazy unmount"
}

# used_bytes MOUNTPOINT|META: sum of "used" over the drive segments.
used_bytes() {
    "$STRIPEFS" df "${1:-$MNT}" --json | json 'sum(s["used"] for s in d["segments"] if s["kind"] == "drive")'
}

fsck_pool() {  # fsck_pool [META] (the pool must be unmounted)
    local out
    out=$("$STRIPEFS" fsck "${1:-$META}" 2>&1) || fail "stripefs fsck ${1:-$META} found problems: $out"
    ok "stripefs fsck ${1:-$META} is clean"
}

# writes_land_on_new_drive ID [WHEN]: 40 MiB written to $MNT/new read back, and
# at least 26 of its 40 chunks on drive ID (the add-drive tests leave room for
# 14 on the old drives). WHEN ends the messages (" online").
writes_land_on_new_drive() {
    local id=$1 when=${2:-} on_new
    head -c $((40 * MiB)) /dev/urandom >"$TMP/new.ref"
    cp "$TMP/new.ref" "$MNT/new" || fail "writing 40 MiB after adding a 64M drive$when failed"
    cmp "$TMP/new.ref" "$MNT/new" || fail "the new file differs"
    on_new=$("$STRIPEFS" placement "$MNT/new" --json | json "sum(1 for c in d['chunks'] if c['replicas'][0]['segment'] == $id)")
    (( on_new >= 26 )) || fail "only $on_new of 40 new chunks on the new drive $id (the old drives had room for 14)"
    ok "the new file's chunks went to the new drive ($on_new of 40 on drive $id)$when"
}

# --- startup ------------------------------------------------------------------
need python3; need fusermount3; need mountpoint
[[ -x "$STRIPEFS" ]] || fail "stripefs binary not found at '$STRIPEFS' (set STRIPEFS)"
[[ -c /dev/fuse ]] || fail "/dev/fuse is missing"
if [[ "$TRANSPORT" == uring ]]; then
    [[ -w "$ENABLE_URING" ]] || fail "STRIPEFS_TRANSPORT=uring: this kernel has no $ENABLE_URING (FUSE over io_uring needs Linux 6.14 or later)"
    URING_WAS=$(cat "$ENABLE_URING")
    echo 1 >"$ENABLE_URING"
fi
if [[ "${NO_DEFAULT_POOL:-0}" != 1 ]]; then
    mkfs_pool
    mount_pool
    log "pool: $NDRIVES x $DRIVE_SIZE drives${RAM_SIZE:+ + $RAM_SIZE RAM} mounted at $MNT"
fi
