#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `stripefs placement` of a file too big for one xattr answer (the kernel
# passes at most 64 KiB; fs/control.h): a 10,000-chunk file, read through the
# mount in pages, lists every chunk, the same as the unmounted pool answers;
# the online scrub checks all of them. Sparse: 4 KiB at each MiB, so every
# chunk exists but the drives stay small.
NDRIVES=2 DRIVE_SIZE=8G RAM_SIZE= CHUNK_SIZE=1M
source "$(dirname "$0")/lib.sh"
need getfattr

N=10000
log "writing 4 KiB at each of $N chunks"
python3 - "$MNT/big" "$N" <<'PY' || fail "writing $MNT/big failed"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
block = b"x" * 4096
for i in range(int(sys.argv[2])):
    os.pwrite(fd, block, i << 20)
os.close(fd)
PY

# --- through the mount: every chunk, in order ---------------------------------
"$STRIPEFS" placement "$MNT/big" --json >"$TMP/online.json" || fail "placement --json of the $N-chunk file failed"
P() { json "$1" <"$TMP/online.json"; }
assert_eq "$(P 'len(d["chunks"])')" "$N" "chunks listed through the mount"
assert_eq "$(P '[c["index"] for c in d["chunks"]] == list(range('"$N"'))')" true "chunk indexes 0..$((N - 1))"
assert_eq "$(P 'all(c["offset"] == c["index"] << 20 and c["length"] == 4096 for c in d["chunks"])')" true \
    "chunk offsets and lengths"
assert_eq "$(P 'all(len(c["replicas"]) == 1 for c in d["chunks"])')" true "one replica each"
assert_eq "$(P 'd["path"]')" "$MNT/big" "path"
assert_eq "$(P 'sorted(d)')" '["chunk_size", "chunks", "path", "size", "uri"]' "members (no page members)"
"$STRIPEFS" placement "$MNT/big" >"$TMP/online.txt" || fail "text placement of the $N-chunk file failed"
grep -q "chunks $N\$" "$TMP/online.txt" || fail "text placement does not count $N chunks: $(head -3 "$TMP/online.txt")"
ok "text placement counts $N chunks"

# --- the names underneath: the whole answer is too big, a page is not ---------
expect_errno E2BIG 'os.getxattr(sys.argv[1], "user.stripefs.placement")' "$MNT/big"
getfattr --absolute-names --only-values -n user.stripefs.placement.from.$((N - 1)) "$MNT/big" >"$TMP/last.json" \
    || fail "getfattr of the last page failed"
assert_eq "$(json '[[c["index"] for c in d["chunks"]], d["next"]]' <"$TMP/last.json")" "[[$((N - 1))], null]" "the last page"
getfattr --absolute-names --only-values -n user.stripefs.placement.from.$N "$MNT/big" >"$TMP/past.json" \
    || fail "getfattr of a page past the end failed"
assert_eq "$(json '[d["chunks"], d["next"]]' <"$TMP/past.json")" "[[], null]" "a page past the end"

# --- the online scrub checks every chunk --------------------------------------
"$STRIPEFS" scrub "$MNT" --json >"$TMP/scrub.json" || fail "online scrub failed: $(cat "$TMP/scrub.json")"
assert_eq "$(json '[d["files"], d["chunks"], d["unrepairable"]]' <"$TMP/scrub.json")" "[1, $N, []]" \
    "online scrub: files, chunks checked, unrepairable"

# --- a small file still answers the whole document under the old name ---------
echo small >"$MNT/small"
getfattr --absolute-names --only-values -n user.stripefs.placement "$MNT/small" >"$TMP/small.json" || fail "getfattr placement of a small file"
assert_eq "$(json '[c["index"] for c in d["chunks"]]' <"$TMP/small.json")" "[0]" "the unpaged name for a small file"

# --- offline, after unmount: the same chunks ----------------------------------
unmount_pool
"$STRIPEFS" placement --meta "$META" /big --json >"$TMP/offline.json" || fail "offline placement failed"
python3 - "$TMP/online.json" "$TMP/offline.json" <<'PY' || fail "online and offline placement differ"
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:])
for k in ("uri", "size", "chunk_size", "chunks"):
    if on[k] != off[k]:
        sys.exit(f"{k} differs")
PY
ok "online placement equals offline placement ($N chunks)"
fsck_pool
