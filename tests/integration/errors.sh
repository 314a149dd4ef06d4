#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad CLI input, mkfs over an existing pool, mounts with missing, swapped or
# foreign drives, and a full pool: clear errors, nothing lost.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
need sha256sum; need dd; need cmp

use_pool() {  # use_pool NAME: point META, MNT, DRIVES at pool $TMP/NAME
    META=$TMP/$1/meta MNT=$TMP/$1/mnt DRIVES=()
    mkdir -p "$TMP/$1"
    for ((i = 0; i < NDRIVES; i++)); do DRIVES+=("$TMP/$1/drive$i.img"); done
}

# expect_cli_fail WHAT CMD...: CMD exits non-zero with a message on stderr (kept in $TMP/err).
expect_cli_fail() {
    local what=$1; shift
    if "$@" >/dev/null 2>"$TMP/err"; then fail "$what: '$*' succeeded"; fi
    [[ -s "$TMP/err" ]] || fail "$what: '$*' failed without a message on stderr"
    ok "$what fails: $(head -n 1 "$TMP/err")"
}
expect_cli_ok() {
    local what=$1; shift
    "$@" >/dev/null 2>"$TMP/err" || fail "$what: '$*' failed: $(cat "$TMP/err")"
    ok "$what succeeds"
}
err_names_drive() {  # err_names_drive WHAT DRIVE...: stderr mentions one of the drives
    local d
    for d in "${@:2}"; do grep -qF -e "$d" -e "$(basename "$d")" "$TMP/err" && { ok "$1: message names $(basename "$d")"; return; }; done
    fail "$1: message does not name the drive ($*): $(cat "$TMP/err")"
}
not_mounted() {
    ! mountpoint -q "$MNT" || fail "$1: $MNT is mounted after a failed mount"
    local pid
    pid=$(tr -dc 0-9 2>/dev/null <"$META/daemon.pid" || true)
    [[ -z "$pid" ]] || ! pid_alive "$pid" || fail "$1: daemon $pid left running after a failed mount"
}

log "--- mkfs argument checking"
mk() { local n=$1; shift; rm -rf "$TMP/mk$n"; mkdir -p "$TMP/mk$n"
       "$STRIPEFS" mkfs --meta "$TMP/mk$n/meta" --drive "$TMP/mk$n/d0:256M" --drive "$TMP/mk$n/d1:256M" "$@"; }
expect_cli_fail "mkfs without --drive" "$STRIPEFS" mkfs --meta "$TMP/nodrive/meta"
expect_cli_fail "mkfs with size 12Q" "$STRIPEFS" mkfs --meta "$TMP/q/meta" --drive "$TMP/q-d0:12Q"
expect_cli_fail "mkfs with --ram 12Q" mk 1 --ram 12Q
expect_cli_fail "chunk size 3M (not a power of two)" mk 2 --chunk-size 3M
expect_cli_fail "chunk size 512K (below 1M)" mk 3 --chunk-size 512K
expect_cli_fail "chunk size 128M (above 64M)" mk 4 --chunk-size 128M
expect_cli_ok "chunk size 1M" mk 5 --chunk-size 1M
expect_cli_ok "chunk size 64M" mk 6 --chunk-size 64M
expect_cli_fail "unknown strategy" mk 7 --strategy no-such-strategy
for s in striped random free-ratio-first two-choice round-robin; do expect_cli_ok "strategy $s" mk 8 --strategy "$s"; done
expect_cli_fail "unknown option" mk 9 --no-such-option
expect_cli_fail "unknown subcommand" "$STRIPEFS" no-such-subcommand

log "--- mkfs over a pool"
mk 10 >/dev/null || fail "mkfs of pool mk10 failed"
expect_cli_fail "mkfs on drives that hold a pool, without --force" \
    "$STRIPEFS" mkfs --meta "$TMP/mk10/meta2" --drive "$TMP/mk10/d0:256M" --drive "$TMP/mk10/d1:256M"
expect_cli_ok "the same mkfs with --force" \
    "$STRIPEFS" mkfs --meta "$TMP/mk10/meta2" --drive "$TMP/mk10/d0:256M" --drive "$TMP/mk10/d1:256M" --force

log "--- mount refusals"
use_pool a; DRIVE_SIZE=64M mkfs_pool; mount_pool
head -c $((9 * MiB)) /dev/urandom >"$MNT/data"
sum_a=$(sha256sum <"$MNT/data")
unmount_pool
expect_cli_fail "mount of a nonexistent meta dir" "$STRIPEFS" mount "$TMP/no-such-meta" "$MNT"
for w in 0 257 x 8x ""; do
    expect_cli_fail "mount -o workers=$w" "$STRIPEFS" mount "$META" "$MNT" -o "workers=$w"
    grep -q "workers=N" "$TMP/err" || fail "workers=$w: message does not say what is expected: $(cat "$TMP/err")"
    not_mounted "workers=$w"
done
expect_cli_fail "mount -o transport=tcp" "$STRIPEFS" mount "$META" "$MNT" -o transport=tcp
grep -q "uring or dev" "$TMP/err" || fail "transport=tcp: message does not name the choices: $(cat "$TMP/err")"
not_mounted "transport=tcp"
# -o transport=uring with the kernel's switch off (or absent): one line that
# says how to turn it on, and no mount. The switch is put back at once (and by
# teardown, through URING_WAS, if this fails first).
if [[ -w "$ENABLE_URING" ]]; then
    URING_WAS=$(cat "$ENABLE_URING")
    echo 0 >"$ENABLE_URING"
fi
expect_cli_fail "mount -o transport=uring with FUSE over io_uring off" "$STRIPEFS" mount "$META" "$MNT" -o transport=uring
[[ -z "$URING_WAS" ]] || { echo "$URING_WAS" >"$ENABLE_URING"; URING_WAS=; }
grep -Eq "enable_uring|Linux 6.14" "$TMP/err" || fail "transport=uring: message does not say how to get the ring: $(cat "$TMP/err")"
(($(wc -l <"$TMP/err") == 1)) || fail "transport=uring: the refusal is not one line: $(cat "$TMP/err")"
not_mounted "transport=uring with the ring off"
MOUNT_OPTS=(-o workers=1); mount_pool; MOUNT_OPTS=()  # one worker serves everything
[[ "$(sha256sum <"$MNT/data")" == "$sum_a" ]] || fail "data differs when served by one worker"
ok "-o workers=1 mounts and serves the data"
unmount_pool
not_mounted "nonexistent meta dir"

mv "${DRIVES[2]}" "$TMP/a/aside"
expect_cli_fail "mount with drive 2 missing" "$STRIPEFS" mount "$META" "$MNT"
not_mounted "missing drive"; err_names_drive "missing drive" "${DRIVES[2]}"
mv "$TMP/a/aside" "${DRIVES[2]}"

mv "${DRIVES[1]}" "$TMP/a/aside"; mv "${DRIVES[3]}" "${DRIVES[1]}"; mv "$TMP/a/aside" "${DRIVES[3]}"
expect_cli_fail "mount with drives 1 and 3 swapped" "$STRIPEFS" mount "$META" "$MNT"
not_mounted "swapped drives"; err_names_drive "swapped drives" "${DRIVES[1]}" "${DRIVES[3]}"
mv "${DRIVES[1]}" "$TMP/a/aside"; mv "${DRIVES[3]}" "${DRIVES[1]}"; mv "$TMP/a/aside" "${DRIVES[3]}"

use_pool b; DRIVE_SIZE=64M mkfs_pool
use_pool a
mv "${DRIVES[0]}" "$TMP/a/aside"; cp --sparse=always "$TMP/b/drive0.img" "${DRIVES[0]}"
expect_cli_fail "mount with drive 0 from another pool" "$STRIPEFS" mount "$META" "$MNT"
not_mounted "foreign drive"; err_names_drive "foreign drive" "${DRIVES[0]}"
mv "$TMP/a/aside" "${DRIVES[0]}"

mount_pool   # with every drive back in place the pool mounts and its data is intact
assert_eq "$(sha256sum <"$MNT/data")" "$sum_a" "data after the refused mounts"
unmount_pool
fsck_pool

log "--- full pool (4 x 16M drives)"
use_pool full; DRIVE_SIZE=16M mkfs_pool; mount_pool
head -c $((3 * MiB)) /dev/urandom >"$MNT/keep1"
head -c $((MiB + 5)) /dev/urandom >"$MNT/keep2"
k1=$(sha256sum <"$MNT/keep1"); k2=$(sha256sum <"$MNT/keep2")
if dd if=/dev/urandom of="$MNT/fill" bs=1M count=200 status=none 2>"$TMP/err"; then
    fail "dd of 200 MiB into a 64 MiB pool succeeded"
fi
grep -q "No space left on device" "$TMP/err" || fail "dd into a full pool: expected ENOSPC, got: $(cat "$TMP/err")"
ok "dd into the full pool fails with: $(head -n 1 "$TMP/err")"
assert_eq "$(sha256sum <"$MNT/keep1")" "$k1" "keep1 after ENOSPC"
assert_eq "$(sha256sum <"$MNT/keep2")" "$k2" "keep2 after ENOSPC"
cat "$MNT/fill" >/dev/null || fail "the partial file written until ENOSPC does not read back"
used_full=$(used_bytes)
rm "$MNT/fill"
freed() { (( used_full - $(used_bytes) >= 8 * MiB )); }
wait_until "space back after rm of the fill file (used was $used_full)" freed
ok "rm gives space back (used $used_full -> $(used_bytes))"
head -c $((8 * MiB)) /dev/urandom >"$TMP/new"
cp "$TMP/new" "$MNT/new" || fail "writing 8 MiB after freeing space failed"
cmp "$TMP/new" "$MNT/new" || fail "the file written after freeing space differs"
ok "a new 8 MiB write after rm succeeds and reads back"
remount_pool
assert_eq "$(sha256sum <"$MNT/keep1")" "$k1" "keep1 after remount"
cmp "$TMP/new" "$MNT/new" || fail "new file differs after remount"
unmount_pool
fsck_pool

log "--- a write(2) larger than the free space: a short count, what it reports is stored"
use_pool short; DRIVE_SIZE=16M mkfs_pool; mount_pool
head -c $((40 * MiB)) /dev/urandom >"$MNT/most"
python3 - "$MNT/big" <<'PY' || fail "short write check failed"
import os, sys
data = os.urandom(48 << 20)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
n = os.write(fd, data)  # more than is free: the kernel splits it, the first pieces fit
assert 0 < n < len(data), f"write of {len(data)} bytes into a nearly full pool returned {n}"
try:
    os.write(fd, data[n:])
    raise SystemExit("the write after the short one succeeded")
except OSError as e:
    assert e.errno == 28, f"expected ENOSPC, got {e}"
os.close(fd)
assert os.stat(sys.argv[1]).st_size == n, f"size {os.stat(sys.argv[1]).st_size} != reported {n}"
assert open(sys.argv[1], "rb").read() == data[:n], "the reported bytes do not read back"
print(f"[errors]   ok: write(2) of 48 MiB returned {n} bytes, the next ENOSPC; exactly those bytes are stored")
PY
unmount_pool
fsck_pool

log "--- CLI: wrong, missing, huge or malformed arguments for every subcommand"
use_pool cli; DRIVE_SIZE=64M mkfs_pool; mount_pool
echo data >"$MNT/file"
mkdir -p "$TMP/notapool" "$TMP/emptydir"
cli_table=(
    "mount without arguments|$STRIPEFS mount"
    "mount of a file as metadata dir|$STRIPEFS mount $MNT/file $TMP/emptydir"
    "mount on a missing mountpoint|$STRIPEFS mount $META $TMP/no/such/dir"
    "mount on a file|$STRIPEFS mount $META $MNT/file"
    "mount of a pool already mounted|$STRIPEFS mount $META $TMP/emptydir"
    "mount with an unknown -o option|$STRIPEFS mount $TMP/a/meta $TMP/emptydir -o no_such_option"
    "mount with workers=99999999999|$STRIPEFS mount $TMP/a/meta $TMP/emptydir -o workers=99999999999"
    "placement without a path|$STRIPEFS placement"
    "placement of a missing file|$STRIPEFS placement $MNT/missing"
    "placement of a directory|$STRIPEFS placement $MNT"
    "placement of a file outside any pool|$STRIPEFS placement /etc/hostname"
    "placement --meta of a non-pool|$STRIPEFS placement /x --meta $TMP/notapool"
    "placement --meta of a missing path|$STRIPEFS placement /no/such --meta $TMP/a/meta"
    "df without a target|$STRIPEFS df"
    "df of a plain directory|$STRIPEFS df $TMP/notapool"
    "df of a missing path|$STRIPEFS df $TMP/missing"
    "fsck without a directory|$STRIPEFS fsck"
    "fsck of a non-pool|$STRIPEFS fsck $TMP/notapool"
    "fsck of a mounted pool|$STRIPEFS fsck $META"
    "fsck with an unknown flag|$STRIPEFS fsck $TMP/a/meta --repair-everything"
    "scrub without a target|$STRIPEFS scrub"
    "scrub of a plain directory|$STRIPEFS scrub $TMP/notapool"
    "scrub of a missing path|$STRIPEFS scrub $TMP/missing"
    "replace-drive without arguments|$STRIPEFS replace-drive"
    "replace-drive with a non-numeric id|$STRIPEFS replace-drive $TMP/a/meta one $TMP/r.img:64M"
    "replace-drive with a negative id|$STRIPEFS replace-drive $TMP/a/meta -1 $TMP/r.img:64M"
    "replace-drive with a huge id|$STRIPEFS replace-drive $TMP/a/meta 99999999999999999999 $TMP/r.img:64M"
    "replace-drive with a malformed size|$STRIPEFS replace-drive $TMP/a/meta 0 $TMP/r.img:12Q"
    "replace-drive with a missing drive file and no size|$STRIPEFS replace-drive $TMP/a/meta 0 $TMP/none.img"
    "replace-drive of a mounted pool|$STRIPEFS replace-drive $META 0 $TMP/r.img:64M"
    "replace-drive of a non-pool|$STRIPEFS replace-drive $TMP/notapool 0 $TMP/r.img:64M"
    "mkfs with a drive size 0|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:0"
    "mkfs with a drive of 1M|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:1M"
    "mkfs with replicas 2 on one drive|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:64M --replicas 2"
    "mkfs with replicas 4|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:64M --replicas 4"
    "mkfs with the same drive twice|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:64M --drive $TMP/z.img:64M"
    "mkfs with a huge size|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/z.img:99999999999999999999T"
    "mkfs with a drive in a missing directory|$STRIPEFS mkfs --meta $TMP/z/meta --drive $TMP/no/such/z.img:64M"
)
for row in "${cli_table[@]}"; do
    what=${row%%|*}; read -r -a cmd <<<"${row#*|}"
    expect_cli_fail "$what" "${cmd[@]}"
    [[ $(wc -c <"$TMP/err") -gt 10 ]] || fail "$what: the message is too short to say what is wrong: $(cat "$TMP/err")"
done
[[ ! -e "$TMP/z/meta/CURRENT" && ! -e "$TMP/r.img" ]] || fail "a refused command left a pool or a drive behind"
ok "${#cli_table[@]} bad invocations: each exits non-zero with a message, nothing created"
unmount_pool

log "--- damaged pools: refused at mount with a clear message, explained by fsck"
use_pool dmg; DRIVE_SIZE=64M mkfs_pool; mount_pool
head -c $((5 * MiB)) /dev/urandom >"$MNT/data"; sum=$(sha256sum <"$MNT/data")
unmount_pool
expect_refused() {  # expect_refused WHAT PATTERN: mount and fsck both fail, naming PATTERN
    expect_cli_fail "$1: mount" "$STRIPEFS" mount "$META" "$MNT"
    grep -q -- "$2" "$TMP/err" || fail "$1: mount message does not say '$2': $(cat "$TMP/err")"
    not_mounted "$1"
    expect_cli_fail "$1: fsck" "$STRIPEFS" fsck "$META"
    grep -q -- "$2" "$TMP/err" || fail "$1: fsck message does not say '$2': $(cat "$TMP/err")"
}
cp "${DRIVES[1]}" "$TMP/dmg/saved"
truncate -s 32M "${DRIVES[1]}"
expect_refused "drive 1 truncated to 32M" "drive 1 .* is truncated"
cp "$TMP/dmg/saved" "${DRIVES[1]}"
dd if=/dev/urandom of="${DRIVES[1]}" bs=512 count=1 conv=notrunc status=none
expect_refused "drive 1 with a garbage superblock" "drive 1 "
cp "$TMP/dmg/saved" "${DRIVES[1]}"
cp -a "$META" "$TMP/dmg/meta.saved"
for f in "$META"/MANIFEST-*; do head -c 100 /dev/urandom >"$f"; done
expect_refused "metadata directory with a garbage MANIFEST" "damaged\|corrupt\|Corruption"
rm -rf "$META"; cp -a "$TMP/dmg/meta.saved" "$META"
echo garbage >"$META/CURRENT"
expect_refused "metadata directory with a garbage CURRENT" "metadata directory"
rm -rf "$META"; cp -a "$TMP/dmg/meta.saved" "$META"
mount_pool
assert_eq "$(sha256sum <"$MNT/data")" "$sum" "data after the damaged copies were put back"

log "--- a mount right after umount waits for the old daemon to close the pool"
for i in 1 2 3; do
    umount "$MNT" || fail "umount $MNT"
    "$STRIPEFS" mount "$META" "$MNT" 2>"$TMP/err" || fail "mount right after umount (round $i): $(cat "$TMP/err")"
done
assert_eq "$(sha256sum <"$MNT/data")" "$sum" "data after three umount+mount rounds"
unmount_pool
fsck_pool

log "--- a full metadata file system: ENOSPC for new names and data, deletes still work"
use_pool metafull
mkdir -p "$TMP/metafull/fs"
mount -t tmpfs -o size=24M stripefs-test-meta "$TMP/metafull/fs" || fail "cannot mount a 24M tmpfs for the metadata"
umount_meta_fs() { umount "$TMP/metafull/fs" 2>/dev/null || true; }
CLEANUP_HOOKS+=(umount_meta_fs)
META=$TMP/metafull/fs/meta
DRIVE_SIZE=64M mkfs_pool; mount_pool
"$STRIPEFS" df "$MNT" | grep -q "^metadata .* kept for deletes" || fail "df does not show the metadata space: $("$STRIPEFS" df "$MNT")"
ffree_before=$(stat -f -c %f "$MNT")
head -c $((3 * MiB)) /dev/urandom >"$MNT/keep"; keep=$(sha256sum <"$MNT/keep")
python3 - "$MNT" <<'PY' || fail "filling the metadata file system"
import errno, os, sys
mnt, n = sys.argv[1], 0
try:
    while True:
        with open(os.path.join(mnt, f"f{n:07d}-" + "x" * 150), "w") as f:
            f.write("y")
        n += 1
except OSError as e:
    assert e.errno == errno.ENOSPC, f"expected ENOSPC, got {e}"
assert n > 1000, f"only {n} files before ENOSPC"
for name in sorted(os.listdir(mnt))[:500]:
    if name.startswith("f"):
        os.unlink(os.path.join(mnt, name))
print(f"[errors]   ok: {n} files created, then ENOSPC; 500 of them deleted afterwards")
PY
(( $(stat -f -c %f "$MNT") < ffree_before )) || fail "statfs free inodes did not drop"
ok "statfs free inodes follow the metadata file system ($ffree_before -> $(stat -f -c %f "$MNT"))"
grep -q "metadata directory .* is nearly full" "$META/stripefs.log" || fail "the refusal is not logged with its reason"
assert_eq "$(sha256sum <"$MNT/keep")" "$keep" "the file written before the metadata filled"
unmount_pool
fsck_pool
