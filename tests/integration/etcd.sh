#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A pool whose metadata lives on a 3-member etcd cluster (stripefs mkfs --meta
# etcd://...): mkfs and mount on it, cp -a of a tree, one member killed while
# fio and a metadata workload run, kill -9 of the daemon and a remount, two of
# 3 members killed (EIO, a log line, and recovery when they return), every
# byte compared and fsck clean. Around that: a second format of the prefix and
# a second read-write mount are refused, a read-only mount beside the writer
# sees what the writer closed within the stated bound, df and placement
# answer as they do for a RocksDB pool, and an unreachable cluster fails the
# mount clearly.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need etcd; need etcdctl; need fio; need sha256sum

CLUSTER_SH=$(cd "$(dirname "$0")/../support" && pwd)/etcd_cluster.sh
CLUSTER=$TMP/etcd
stop_cluster() { bash "$CLUSTER_SH" stop "$CLUSTER"; }
CLEANUP_HOOKS+=(stop_cluster)  # after the unmount: the daemon's last commits go to etcd
bash "$CLUSTER_SH" start "$CLUSTER" || fail "could not start a 3-member etcd cluster in $CLUSTER"
META="etcd://$(cat "$CLUSTER/endpoints")/stripefs-it"
DAEMON_STATE=$TMP/state
log "cluster: $META"

# durable DIR: fsync every file and directory under DIR, so a kill -9 of the
# daemon cannot take what the comparison after it expects.
durable() { find "$1" \( -type f -o -type d \) -print0 | xargs -0 sync; }

log "--- mkfs and mount on etcd"
mkfs_pool
out=$("$STRIPEFS" mkfs --meta "$META" --drive "$TMP/other.img:64M" 2>&1) && fail "a second mkfs of $META succeeded"
[[ "$out" == *"already holds a stripefs pool"* ]] || fail "a second mkfs of $META: unclear refusal: $out"
[[ ! -e "$TMP/other.img" ]] || fail "the refused mkfs created its drive file"
ok "a second mkfs of the prefix is refused, and touches no drive"
mount_pool
assert_eq "$("$STRIPEFS" df "$MNT" --json | json 'd["metadata"]["path"]')" "$META" "df's metadata path"
(( $("$STRIPEFS" df "$MNT" --json | json 'd["metadata"]["used"]') > 0 )) || fail "df says the etcd store uses no bytes"
ok "df reports the etcd store's use"

mkdir -p "$TMP/mnt2"
out=$(timeout 60 "$STRIPEFS" mount "$META" "$TMP/mnt2" -o "state=$TMP/state2" 2>&1) && fail "a second read-write mount of $META succeeded"
[[ "$out" == *"writer lock"* ]] || fail "a second read-write mount: unclear refusal: $out"
! mountpoint -q "$TMP/mnt2" || fail "the refused mount left $TMP/mnt2 mounted"
ok "a second read-write mount is refused: $out"

log "--- a reader: a second mount with -o ro, beside the writer"
READER=$TMP/reader
mkdir -p "$READER"
MOUNTED+=("$TMP/reader-state|$READER")  # for teardown
timeout 60 "$STRIPEFS" mount "$META" "$READER" -o "ro,state=$TMP/reader-state" \
    || fail "a read-only mount beside the writer failed"
# seen_within WHAT CMD...: CMD succeeds within the stated bound, a reader's
# kernel cache lease of 1 s plus the writer's send to etcd (milliseconds),
# given another second for a loaded machine. Polls every 0.1 s.
seen_within() {
    local what=$1 i
    shift
    for ((i = 0; i < 20; i++)); do
        "$@" && { ok "the reader sees $what after $((i / 10)).$((i % 10)) s"; return 0; }
        sleep 0.1
    done
    fail "the reader does not see $what 2 s after the writer closed it"
}
head -c $((6 * MiB)) /dev/urandom >"$TMP/shared.ref"
ls "$READER" >/dev/null  # the reader has listed the directory before the file exists
cp "$TMP/shared.ref" "$MNT/shared"
seen_within "a new file, byte for byte," cmp -s "$TMP/shared.ref" "$READER/shared"
head -c $((3 * MiB)) /dev/urandom >"$TMP/shared2.ref"
cp "$TMP/shared2.ref" "$MNT/shared"
seen_within "the file rewritten shorter, byte for byte," cmp -s "$TMP/shared2.ref" "$READER/shared"
mv "$MNT/shared" "$MNT/renamed"
seen_within "the rename" test -e "$READER/renamed" -a ! -e "$READER/shared"
out=$(touch "$READER/x" 2>&1) && fail "a write through the reader succeeded"
[[ "$out" == *"Read-only file system"* ]] || fail "a write through the reader: not EROFS: $out"
ok "a write through the reader fails with EROFS"
rm "$MNT/renamed"
reader_pid=$(daemon_pid "$TMP/reader-state")  # before the unmount: the daemon removes the file as it exits
timeout 60 fusermount3 -u "$READER" || fail "could not unmount the reader"
wait_pid_gone "$reader_pid" || fail "the reader's daemon did not exit"
ok "the reader unmounts, and the writer goes on"

log "--- cp -a of a tree"
SRC=/usr/share/doc
timeout 900 cp -a "$SRC" "$MNT/doc" || fail "cp -a $SRC onto the etcd pool failed"
diff -r --no-dereference "$SRC" "$MNT/doc" >/dev/null || fail "the copy of $SRC differs"
ok "cp -a of $SRC ($(find "$SRC" -type f | wc -l) files) reads back the same"
big=$(find "$SRC" -type f -size +100k -print -quit)
[[ -n "$big" ]] || fail "no file over 100 KiB in $SRC to look up"
chunks=$("$STRIPEFS" placement "$MNT/doc/${big#"$SRC"/}" --json | json 'len(d["chunks"])')
(( chunks >= 1 )) || fail "placement of ${big#"$SRC"/} lists no chunk"
ok "placement answers on the etcd pool ($chunks chunk(s))"

log "--- one of 3 members killed while fio and a metadata workload run"
timeout 300 fio --name=etcd-member-down --filename="$MNT/fio.dat" --size=64M --bs=64k --rw=randwrite \
    --ioengine=psync --verify=crc32c --do_verify=1 --verify_state_save=0 --end_fsync=1 --output="$TMP/fio.out" &
fio_pid=$!
(
    mkdir "$MNT/churn"
    for i in $(seq 0 399); do
        echo "file $i" >"$MNT/churn/f$i"
        mv "$MNT/churn/f$i" "$MNT/churn/g$i"
        (( i % 4 )) || rm "$MNT/churn/g$i"
    done
) &
churn_pid=$!
sleep 1
bash "$CLUSTER_SH" kill "$CLUSTER" 0 || fail "could not kill member 0"
log "member 0 killed"
wait "$fio_pid" || fail "fio failed with a member down: $(tail -20 "$TMP/fio.out")"
wait "$churn_pid" || fail "the metadata workload failed with a member down"
grep -q "err= 0" "$TMP/fio.out" || fail "fio reports errors: $(grep err= "$TMP/fio.out")"
ok "fio (64 MiB random 64 KiB writes, verified) and 400 create/rename/unlink rounds ran through"
for i in $(seq 0 399); do
    if (( i % 4 )); then [[ "$(cat "$MNT/churn/g$i")" == "file $i" ]] || fail "churn/g$i is wrong"
    else [[ ! -e "$MNT/churn/g$i" ]] || fail "churn/g$i was unlinked but is there"; fi
done
head -c $((8 * MiB)) /dev/urandom >"$TMP/after.ref"
cp "$TMP/after.ref" "$MNT/after"
cmp "$TMP/after.ref" "$MNT/after" || fail "a file written with a member down reads back wrong"
ok "the metadata workload's names are right, and new writes read back with a member down"
bash "$CLUSTER_SH" restart "$CLUSTER" 0 || fail "could not restart member 0"

log "--- kill -9 of the daemon, and a remount"
durable "$MNT"
fio_sum=$(sha256sum <"$MNT/fio.dat")
kill9_daemon
mount_pool
diff -r --no-dereference "$SRC" "$MNT/doc" >/dev/null || fail "the copy of $SRC differs after kill -9 and remount"
assert_eq "$(sha256sum <"$MNT/fio.dat")" "$fio_sum" "sha256 of fio's file after kill -9 and remount"
cmp "$TMP/after.ref" "$MNT/after" || fail "the file written with a member down differs after the remount"
assert_eq "$(ls "$MNT/churn" | wc -l)" 300 "names left by the metadata workload after the remount"

log "--- two of 3 members killed, then both back"
head -c $((4 * MiB)) /dev/urandom >"$TMP/before.ref"
cp "$TMP/before.ref" "$MNT/before"
durable "$MNT"
ls "$MNT" >/dev/null  # the daemon now knows every name of the root directory
bash "$CLUSTER_SH" kill "$CLUSTER" 1 || fail "could not kill member 1"
bash "$CLUSTER_SH" kill "$CLUSTER" 2 || fail "could not kill member 2"
log "members 1 and 2 killed: the cluster has lost its majority"
# The first change is queued and answered; the send behind it fails after
# the daemon's request timeout (5 s), and the fsync waiting for it fails.
start=$SECONDS
mkdir "$MNT/queued" || fail "mkdir with the cluster down: the change should be queued"
if out=$(timeout 120 bash -c 'echo x >"$1" && sync "$1"' _ "$MNT/synced" 2>&1); then
    fail "an fsync succeeded with two of 3 members down"
fi
[[ "$out" == *"Input/output error"* ]] || fail "the fsync with two of 3 members down did not fail with EIO: $out"
ok "an fsync with two of 3 members down fails with EIO after $((SECONDS - start)) s"
if out=$(timeout 60 touch "$MNT/refused" 2>&1); then fail "a create succeeded while the cluster is known down"; fi
[[ "$out" == *"Input/output error"* ]] || fail "a create while the cluster is down did not fail with EIO: $out"
ok "a new change fails at once with EIO: $out"
grep -q "metadata store: cannot write" "$DAEMON_STATE/stripefs.log" \
    || fail "the daemon's log does not say why: $(tail -5 "$DAEMON_STATE/stripefs.log")"
ok "the log says: $(grep -m1 "metadata store: cannot write" "$DAEMON_STATE/stripefs.log" | cut -c1-160)..."
cmp "$TMP/before.ref" "$MNT/before" || fail "a file written before the members died reads back wrong"
ok "a file written before reads back with the cluster down"
bash "$CLUSTER_SH" restart "$CLUSTER" 1 || fail "could not restart member 1"
bash "$CLUSTER_SH" restart "$CLUSTER" 2 || fail "could not restart member 2"
start=$SECONDS
for ((i = 0; i < 120; i++)); do
    timeout 60 touch "$MNT/back" 2>/dev/null && break
    sleep 1
done
[[ -e "$MNT/back" ]] || fail "the mount did not recover within 120 s of the members' return"
ok "the mount writes again $((SECONDS - start)) s after the members returned"
grep -q "metadata store: writing again" "$DAEMON_STATE/stripefs.log" || fail "the log does not say it recovered"
durable "$MNT"
remount_pool
[[ -d "$MNT/queued" ]] || fail "the directory made just as the cluster went down was lost"
[[ ! -e "$MNT/refused" ]] || fail "the refused create left a file"
cmp "$TMP/before.ref" "$MNT/before" || fail "the file written before the outage differs after the remount"
ok "after the remount: the queued mkdir is there, the refused create is not, the bytes are the same"
unmount_pool
fsck_pool
df_free=$("$STRIPEFS" df "$META" --json | json 'd["metadata"]["free"]')
(( df_free > 0 )) || fail "df of the unmounted etcd pool says no room"
ok "df of the unmounted pool by its etcd:// address"

log "--- an unreachable cluster at mount"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if out=$(timeout 60 "$STRIPEFS" mount "etcd://127.0.0.1:$port/nothing" "$MNT" -o "state=$TMP/state3" 2>&1); then
    fail "a mount of an unreachable etcd succeeded"
fi
[[ "$out" == *"127.0.0.1:$port"* ]] || fail "the refusal does not name the cluster: $out"
! mountpoint -q "$MNT" || fail "the refused mount left $MNT mounted"
ok "an unreachable cluster fails the mount: $out"
