#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# (fio --thread: the job is a thread of the process the signal kills, not a
# forked child that would outlive it.)
# Requests interrupted by signals: readers and writers killed (SIGINT, then
# SIGKILL) in the middle of 1 MiB O_DIRECT requests. The kernel sends
# FUSE_INTERRUPT for each request it gives up on (through /dev/fuse on both
# transports); the mount must keep answering, and the bytes must stay as
# written. Run with STRIPEFS_TRANSPORT=uring for the io_uring transport.
source "$(dirname "$0")/lib.sh"
need fio

head -c $((64 * MiB)) /dev/urandom >"$TMP/ref"
cp "$TMP/ref" "$MNT/file"
sync "$MNT/file"

# A reader or writer that runs until killed: fio, time based.
victim() {  # victim read|write
    exec fio --thread --name=victim --filename="$MNT/scratch" --rw="rand$1" --bs=1M --direct=1 --ioengine=psync \
        --size=32M --time_based --runtime=60 --output=/dev/null
}
for sig in INT KILL; do
    for ((i = 0; i < 20; i++)); do
        kind=$([[ $((i % 2)) == 0 ]] && echo read || echo write)
        victim "$kind" &
        pid=$!
        sleep 0.$((RANDOM % 3 + 1))
        kill -s "$sig" "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    ok "20 readers and writers killed with SIG$sig in the middle of their requests"
done

cmp "$TMP/ref" "$MNT/file" || fail "the file written before the signals differs"
timeout 60 dd if="$MNT/scratch" of=/dev/null bs=1M iflag=direct status=none || fail "the interrupted file does not read back"
ok "the mount answers and the file written before the signals reads back byte for byte"
remount_pool
cmp "$TMP/ref" "$MNT/file" || fail "the file differs after a remount"
ok "and after a remount"
