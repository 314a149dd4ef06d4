#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Crash driver (DESIGN invariants 4-6): stripefs-stress runs on the mount with
# --state while the daemon gets kill -9 at a random moment; then fsck must be
# clean, and after a remount `stripefs-stress --verify-state` checks that every
# file fsynced and untouched since reads exactly as recorded and that no file
# holds bytes never written to it. The next iteration continues the stress on
# the same files.
#
#   CRASH_ITERATIONS  kills (default 5, the CI mode; 200 for the long mode)
#   CRASH_SEED        the stress seeds and kill moments follow from it (the thread
#                     interleaving, and so the exact state at each kill, does not)
#   CRASH_KEEP        where to keep the evidence of a failure (default /tmp)
#   STRIPEFS_STRESS   the stripefs-stress binary (default: tests/stress/ of the
#                     build directory that holds $STRIPEFS as tools/stripefs)
#
# Long mode, from a build directory:
#   CRASH_ITERATIONS=200 STRIPEFS=tools/stripefs bash ../tests/integration/crash.sh
DRIVE_SIZE=${DRIVE_SIZE:-512M}  # room for 4 threads x 16 files x 12 MiB at worst
source "$(dirname "$0")/lib.sh"

STRESS=${STRIPEFS_STRESS:-$(dirname "$STRIPEFS")/../tests/stress/stripefs-stress}
[[ -x "$STRESS" ]] || fail "stripefs-stress not found at '$STRESS' (set STRIPEFS_STRESS)"
ITERATIONS=${CRASH_ITERATIONS:-5}
SEED=${CRASH_SEED:-$(( (RANDOM << 15 | RANDOM) % 1000000 ))}
KEEP=${CRASH_KEEP:-/tmp}
RANDOM=$SEED  # the kill moments follow from the seed too
STATE=$TMP/stress.state
WORK=$MNT/stress
STRESS_ARGS=(--threads 4 --overwriters 1 --files 16 --max-size 12M)

kills=0 ops=0 clean_files=0 clean_bytes=0 other_files=0 other_bytes=0 garbage=0 lost=0 fsck_problems=0

totals() {
    log "totals: $kills kills, $ops stress ops; verified $clean_files fsynced files ($clean_bytes bytes)" \
        "and $other_files unsynced files ($other_bytes bytes); lost fsynced files $lost, garbage $garbage," \
        "fsck problems $fsck_problems"
}

# evidence WHY: keeps logs, state and metadata of a failed iteration, prints how to repeat it, fails.
evidence() {
    local dir
    dir=$(mktemp -d "$KEEP/stripefs-crash-$SEED-$i.XXXXXX")
    cp -a "$TMP"/stress.* "$TMP"/ops.* "$TMP"/fsck.* "$TMP"/verify.* "$META"/stripefs.log "$dir"/ 2>/dev/null || true
    totals
    log "evidence in $dir (stress op logs, outputs, state file, daemon log)"
    log "repeat (same seeds and kill moments): CRASH_SEED=$SEED CRASH_ITERATIONS=$i STRIPEFS=$STRIPEFS bash $0"
    fail "iteration $i: $1"
}

# what an exit status of stripefs-stress means
stress_status() {
    case $1 in
        0) echo "0: it stopped early, the mount went away (did the daemon die? see stripefs.log)" ;;
        1) echo "1: a result differed from its model (wrong bytes, an unexpected error such as EIO)" ;;
        *) echo "$1: bad arguments or state file" ;;
    esac
}

log "seed $SEED, $ITERATIONS iterations, stress ${STRESS_ARGS[*]} on $WORK"
for ((i = 1; i <= ITERATIONS; i++)); do
    seed=$((SEED * 1000 + i))
    delay_ms=$((1000 + RANDOM % 3001))
    out=$TMP/stress.$i.out
    "$STRESS" --dir "$WORK" "${STRESS_ARGS[@]}" --seconds 600 --seed "$seed" --state "$STATE" \
        --allow-disconnect --log "$TMP/ops.$i.log" >"$out" 2>&1 &
    spid=$!
    sleep "$((delay_ms / 1000)).$(printf %03d $((delay_ms % 1000)))"
    if ! pid_alive "$spid"; then
        rc=0; wait "$spid" || rc=$?
        cat "$out" >&2
        evidence "stripefs-stress (seed $seed) exited before the kill with $(stress_status $rc)"
    fi

    dpid=$(daemon_pid)
    pid_alive "$dpid" || evidence "the daemon died before the kill (a stripefs crash: see stripefs.log)"
    kill -9 "$dpid"
    wait_pid_gone "$dpid" || evidence "daemon $dpid survived kill -9"
    kills=$((kills + 1))
    # The stress sees ENOTCONN and stops by itself; only then is the dead mount
    # lazily unmounted, so that nothing it does can land in the directory below.
    for ((w = 0; w < 600; w++)); do pid_alive "$spid" || break; sleep 0.1; done
    pid_alive "$spid" && { kill -9 "$spid"; evidence "stripefs-stress did not stop after the daemon died"; }
    rc=0; wait "$spid" || rc=$?
    if ((rc != 0)); then
        cat "$out" >&2
        evidence "stripefs-stress (seed $seed) exited with $(stress_status $rc)"
    fi
    n=$(sed -n 's/^stripefs-stress: \([0-9]*\) ops in.*/\1/p' "$out")
    ops=$((ops + ${n:-0}))
    fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" || evidence "could not lazy-unmount $MNT"
    ! mountpoint -q "$MNT" || evidence "$MNT still mounted after lazy unmount"

    "$STRIPEFS" fsck "$META" >"$TMP/fsck.$i.out" 2>&1 \
        || { fsck_problems=$((fsck_problems + 1)); cat "$TMP/fsck.$i.out" >&2; evidence "stripefs fsck found problems"; }
    "$STRIPEFS" fsck --verify "$META" >>"$TMP/fsck.$i.out" 2>&1 \
        || { fsck_problems=$((fsck_problems + 1)); cat "$TMP/fsck.$i.out" >&2; evidence "stripefs fsck --verify found problems"; }

    mount_pool
    rc=0; "$STRESS" --verify-state "$STATE" --dir "$WORK" >"$TMP/verify.$i.out" 2>&1 || rc=$?
    line=$(grep '^VERIFY ' "$TMP/verify.$i.out" || true)
    [[ -n "$line" ]] || { cat "$TMP/verify.$i.out" >&2; evidence "stripefs-stress --verify-state failed ($rc)"; }
    declare -A v=()
    for kv in ${line#VERIFY }; do v[${kv%%=*}]=${kv#*=}; done
    clean_files=$((clean_files + v[clean_files])) clean_bytes=$((clean_bytes + v[clean_bytes]))
    other_files=$((other_files + v[other_files])) other_bytes=$((other_bytes + v[other_bytes]))
    garbage=$((garbage + v[garbage])) lost=$((lost + v[lost]))
    log "iteration $i/$ITERATIONS: killed after ${delay_ms} ms (stress seed $seed, ${n:-?} ops); fsck clean;" \
        "checked ${v[clean_files]} fsynced files (${v[clean_bytes]} bytes), ${v[other_files]} unsynced files" \
        "(${v[other_bytes]} bytes): lost ${v[lost]}, garbage ${v[garbage]}, read errors ${v[errors]}"
    if ((rc != 0)); then
        grep '^PROBLEM' "$TMP/verify.$i.out" >&2 || cat "$TMP/verify.$i.out" >&2
        evidence "after kill -9: lost fsynced data ${v[lost]}, garbage ${v[garbage]}, read errors ${v[errors]}"
    fi
    unset v
done

unmount_pool
fsck_pool
totals
((kills == ITERATIONS && lost == 0 && garbage == 0 && fsck_problems == 0)) || fail "totals do not add up"
ok "$kills kills: no fsynced byte lost, no garbage, fsck clean every time"
