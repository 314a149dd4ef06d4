#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fio write+verify (crc32c) through psync and io_uring, sequential and 4k
# random, buffered; then verify-only again after remount.
source "$(dirname "$0")/lib.sh"
need fio

run_fio() {  # run_fio LABEL FIO ARGS...: fio must exit 0 and report error 0 for every job
    local label=$1; shift
    fio --output-format=json --output="$TMP/fio.json" "$@" >"$TMP/fio.out" 2>&1 \
        || fail "fio $label exited non-zero: $(cat "$TMP/fio.out") $(cat "$TMP/fio.json")"
    python3 - "$TMP/fio.json" <<'PY' || fail "fio $label reported errors: $(cat "$TMP/fio.out")"
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text[text.index("{"):])   # fio may print notes before the JSON
jobs = d["jobs"]
assert jobs, "no jobs in fio output"
for j in jobs:
    assert j["error"] == 0, f"job {j['jobname']}: error {j['error']}"
    assert j["read"]["io_bytes"] > 0, f"job {j['jobname']}: nothing read back for verification"
PY
    ! grep -qi "verify.*\(bad\|fail\|mismatch\)" "$TMP/fio.out" || fail "fio $label printed verify failures"
    ok "fio $label: exit 0, no errors, data read back and verified"
}

common=(--directory="$MNT" --size=64M --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=1 --verify_state_save=0)
for engine in psync io_uring; do
    run_fio "$engine rw=write bs=128k" --name="seq-$engine" --ioengine=$engine --rw=write --bs=128k "${common[@]}"
    run_fio "$engine rw=randwrite bs=4k" --name="rand-$engine" --ioengine=$engine --rw=randwrite --bs=4k "${common[@]}"
done

# The files fio wrote must still verify after the data went through a remount.
remount_pool
log "remounted"
for engine in psync io_uring; do
    run_fio "$engine verify_only seq after remount" --name="seq-$engine" --ioengine=$engine --rw=write --bs=128k --verify_only "${common[@]}"
    run_fio "$engine verify_only rand after remount" --name="rand-$engine" --ioengine=$engine --rw=randwrite --bs=4k --verify_only "${common[@]}"
done
