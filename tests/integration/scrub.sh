#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Repair from replicas (DESIGN invariant 7), scrub and replace-drive:
#  - a flipped byte in a 2-replica chunk reads back right through the mount and
#    the bad copy on the drive is rewritten;
#  - `stripefs scrub MOUNTPOINT` finds a bad copy no read touched and repairs
#    it, names a 1-replica chunk it cannot repair and exits non-zero;
#  - `stripefs replace-drive` puts a new drive in place of a deleted one and
#    rebuilds every 2-replica file; a 1-replica chunk that lived only there is
#    reported lost.
source "$(dirname "$0")/lib.sh"
need setfattr

# byte_at FILE OFFSET / set_byte FILE OFFSET VALUE: one byte of a drive file.
byte_at() { dd if="$1" bs=1 skip="$2" count=1 status=none | od -An -tu1 | tr -d ' '; }
set_byte() { printf "$(printf '\\%03o' "$3")" | dd of="$1" bs=1 seek="$2" conv=notrunc,fsync status=none; }
# replica FILE CHUNK REPLICA FIELD: a field of a replica in the placement JSON.
replica() { "$STRIPEFS" placement "$1" --json | json "d['chunks'][$2]['replicas'][$3]['$4']"; }

mkdir "$MNT/safe"
setfattr -n user.stripefs.replicas -v 2 "$MNT/safe"
for i in 1 2 3 4 5 6; do head -c $((9 * MiB + i * 1000)) /dev/urandom >"$MNT/safe/f$i"; done
head -c $((8 * MiB)) /dev/urandom >"$MNT/single"
(cd "$MNT" && sha256sum safe/f* single) >"$TMP/sums"

# 1. Read repair: the first replica of chunk 1 of f1 (the copy reads go to) is bad.
drive=$(replica "$MNT/safe/f1" 1 0 path)
offset=$(( $(replica "$MNT/safe/f1" 1 0 offset) + 777 ))
orig=$(byte_at "$drive" "$offset")
set_byte "$drive" "$offset" $(( orig ^ 0x01 ))
dd if="$MNT/safe/f1" of="$TMP/f1" bs=1M iflag=direct status=none || fail "reading f1 with a bad replica failed"
(cd "$TMP" && sha256sum -c --quiet <(sed 's|safe/f1$|f1|;t;d' "$TMP/sums")) || fail "f1 read back wrong bytes"
ok "f1 reads back right with a flipped byte in its first replica"
assert_eq "$(byte_at "$drive" "$offset")" "$orig" "the flipped byte on the drive after the read (rewritten)"

# 2. Online scrub: a bad second replica of f4 (no read looks there) and a bad 1-replica chunk.
drive4=$(replica "$MNT/safe/f4" 2 1 path)
offset4=$(( $(replica "$MNT/safe/f4" 2 1 offset) + 4096 * 3 + 5 ))
orig4=$(byte_at "$drive4" "$offset4")
set_byte "$drive4" "$offset4" $(( orig4 ^ 0x80 ))
drive_s=$(replica "$MNT/single" 1 0 path)
offset_s=$(( $(replica "$MNT/single" 1 0 offset) + 100 ))
orig_s=$(byte_at "$drive_s" "$offset_s")
set_byte "$drive_s" "$offset_s" $(( orig_s ^ 0x10 ))
if "$STRIPEFS" scrub "$MNT" >"$TMP/scrub.out" 2>"$TMP/scrub.err"; then
    fail "scrub exited 0 with an unrepairable chunk: $(cat "$TMP/scrub.out")"
fi
cat "$TMP/scrub.out"
grep -q "^checked 7 files, .*: 1 blocks repaired" "$TMP/scrub.out" || fail "scrub summary: $(cat "$TMP/scrub.out")"
grep -q "^UNREPAIRABLE: $MNT/single: object .* chunk 1: 1 of 1024 blocks have no intact replica" "$TMP/scrub.out" \
    || fail "scrub does not name the bad chunk of single: $(cat "$TMP/scrub.out")"
[[ $(grep -c UNREPAIRABLE "$TMP/scrub.out") == 1 ]] || fail "scrub reports more than the one bad chunk"
grep -q "reading them fails with EIO" "$TMP/scrub.err" || fail "scrub's error message: $(cat "$TMP/scrub.err")"
ok "scrub repaired one block and named the unrepairable chunk of single, exit non-zero"
assert_eq "$(byte_at "$drive4" "$offset4")" "$orig4" "the bad byte of f4's second replica after scrub"
if "$STRIPEFS" scrub "$META" 2>"$TMP/err"; then fail "scrub of a mounted pool's metadata directory succeeded"; fi
grep -q "give its mountpoint" "$TMP/err" || fail "scrub of a mounted META: $(cat "$TMP/err")"
ok "scrub of the metadata directory of a mounted pool is refused: $(cat "$TMP/err")"

set_byte "$drive_s" "$offset_s" "$orig_s"
"$STRIPEFS" scrub "$MNT" --json >"$TMP/scrub.json" || fail "scrub after restoring the byte: $(cat "$TMP/scrub.json")"
assert_eq "$(json '(d["files"], d["repaired_blocks"], d["unrepairable"], d["chunks"])' <"$TMP/scrub.json")" \
    "(7, 0, [], 20)" "scrub --json after restoring single's byte: (files, repaired, unrepairable, chunks)"
(cd "$MNT" && sha256sum -c --quiet "$TMP/sums") || fail "files differ after scrub"
ok "every file reads back after the scrub"

# on_terminal CMD...: CMD's stdout and stderr as a terminal shows them, carriage returns and the line clear removed.
on_terminal() { script -qec "$(printf '%q ' "$@")" /dev/null | sed 's/\x1b\[K//g' | tr -d '\r'; }
on_terminal "$STRIPEFS" scrub "$MNT" >"$TMP/tty.out"
cat "$TMP/tty.out"
grep -Eq '^scrub: .* of about [0-9.]+[KMG]i?B? \([0-9]+%\)' "$TMP/tty.out" || fail "no progress line with a total on a terminal"
grep -q '^checked 7 files, ' "$TMP/tty.out" || fail "the summary does not start its own line after the progress"
ok "on a terminal, scrub shows its progress against a total and prints the summary on its own line"

# 3. replace-drive: the drive holding chunk 0 of single is deleted.
lost=$(replica "$MNT/single" 0 0 segment)
uri=$("$STRIPEFS" placement "$MNT/single" --json | json 'd["uri"]')
unmount_pool
rm "${DRIVES[$lost]}"
if "$STRIPEFS" replace-drive "$META" 9 "$TMP/new.img:256M" 2>"$TMP/err"; then fail "replace-drive of drive 9 succeeded"; fi
grep -q "has no drive 9" "$TMP/err" || fail "replace-drive 9: $(cat "$TMP/err")"
if "$STRIPEFS" replace-drive "$META" "$lost" "$TMP/new.img:64M" 2>"$TMP/err"; then fail "a too small drive was accepted"; fi
grep -q "too small" "$TMP/err" || fail "replace-drive with a small drive: $(cat "$TMP/err")"
other=$(( (lost + 1) % NDRIVES ))
if "$STRIPEFS" replace-drive "$META" "$lost" "${DRIVES[$other]}" 2>"$TMP/err"; then fail "a drive of the pool was accepted"; fi
grep -q "already" "$TMP/err" || fail "replace-drive with a pool drive: $(cat "$TMP/err")"
ok "replace-drive refuses a wrong id, a small drive and a drive of the pool"

if "$STRIPEFS" replace-drive "$META" "$lost" "$TMP/new.img:256M" >"$TMP/rebuild.out" 2>"$TMP/err"; then
    fail "replace-drive exited 0 although single's chunk 0 had no other replica"
fi
cat "$TMP/rebuild.out"
grep -q "^drive $lost is now $TMP/new.img" "$TMP/rebuild.out" || fail "replace-drive output: $(cat "$TMP/rebuild.out")"
grep -q "^UNREPAIRABLE: object $uri chunk 0" "$TMP/rebuild.out" || fail "the lost chunk of single is not named"
repaired=$(sed -n 's/.*: \([0-9]*\) blocks repaired.*/\1/p' "$TMP/rebuild.out")
(( repaired > 0 )) || fail "replace-drive rebuilt nothing"
ok "replace-drive rebuilt $repaired blocks and names the one chunk it could not rebuild"
"$STRIPEFS" df "$META" --json | json "d['segments'][$lost]['path']" | grep -qx "$TMP/new.img" \
    || fail "df does not show the new drive"

mount_pool   # no -o degraded: every drive is present again
(cd "$MNT" && sha256sum -c --quiet <(grep safe/ "$TMP/sums")) || fail "a 2-replica file differs after replace-drive"
ok "all 6 two-replica files read back after replace-drive"
if cat "$MNT/single" >/dev/null 2>"$TMP/err"; then fail "the lost chunk of single read without error"; fi
grep -q "Input/output error" "$TMP/err" || fail "expected EIO, got: $(cat "$TMP/err")"
ok "single, whose chunk 0 had no other copy, fails with EIO"
rm "$MNT/single"
"$STRIPEFS" scrub "$MNT" >/dev/null || fail "scrub after replace-drive and removing single"
unmount_pool
"$STRIPEFS" fsck "$META" --verify >/dev/null || fail "fsck --verify after replace-drive: $("$STRIPEFS" fsck "$META" --verify)"
on_terminal "$STRIPEFS" fsck "$META" --verify >"$TMP/tty.out"
grep -Eq '^fsck --verify: .* of about .*%\)' "$TMP/tty.out" || fail "fsck --verify on a terminal: $(cat "$TMP/tty.out")"
on_terminal "$STRIPEFS" fsck "$META" >"$TMP/tty.out"
grep -Eq '^fsck: .* of about .*%\)' "$TMP/tty.out" || fail "fsck on a terminal: $(cat "$TMP/tty.out")"
grep -q '^pool .* is clean' "$TMP/tty.out" || fail "fsck's summary does not start its own line: $(cat "$TMP/tty.out")"
ok "fsck --verify is clean"
# The second replica of every rebuilt chunk is on the new drive: reading from it alone must work.
mv "${DRIVES[$other]}" "$TMP/other.img"
MOUNT_OPTS=(-o degraded)
mount_pool
(cd "$MNT" && sha256sum -c --quiet <(grep safe/ "$TMP/sums")) || fail "files differ with drive $other gone"
ok "with drive $other also gone, the rebuilt copies serve every 2-replica file"
unmount_pool
mv "$TMP/other.img" "${DRIVES[$other]}"
