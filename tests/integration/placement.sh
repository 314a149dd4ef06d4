#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `stripefs placement`: striped layout of a big file, spread of many small
# files, URI stable across rename, replica ranges hold the file's bytes.
source "$(dirname "$0")/lib.sh"

placement() { "$STRIPEFS" placement "$1" --json; }

# --- a 16 MiB file: 4 chunks of 4 MiB on 4 distinct drives -----------------
head -c $((16 * MiB)) /dev/urandom >"$TMP/big.ref"
cp "$TMP/big.ref" "$MNT/big"
placement "$MNT/big" >"$TMP/big.json" || fail "placement --json $MNT/big failed"
P() { json "$1" <"$TMP/big.json"; }
assert_eq "$(P 'd["size"]')" 16777216 "size of the 16 MiB file"
assert_eq "$(P 'd["chunk_size"]')" $((4 * MiB)) "chunk_size"
assert_eq "$(P 'len(d["uri"]) > 0')" true "uri is non-empty"
assert_eq "$(P 'len(d["chunks"])')" 4 "number of chunks"
assert_eq "$(P '[c["index"] for c in d["chunks"]]')" "[0, 1, 2, 3]" "chunk indexes"
assert_eq "$(P '[c["offset"] for c in d["chunks"]]')" "[0, 4194304, 8388608, 12582912]" "chunk offsets"
assert_eq "$(P '[c["length"] for c in d["chunks"]]')" "[4194304, 4194304, 4194304, 4194304]" "chunk lengths"
drives_json=$(printf '%s\n' "${DRIVES[@]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))')
# First drive replica of every chunk (a RAM copy, if listed, is not a placement).
P "[[r for r in c[\"replicas\"] if r[\"segment\"] < $NDRIVES][:1] for c in d[\"chunks\"]]" >"$TMP/drive_replicas.json"
assert_eq "$(json 'all(len(x) == 1 for x in d)' <"$TMP/drive_replicas.json")" true "every chunk has a drive replica"
assert_eq "$(json 'len({x[0]["segment"] for x in d})' <"$TMP/drive_replicas.json")" 4 "distinct drive segments of the 4 chunks"
assert_eq "$(json "all(x[0]['path'] == $drives_json[x[0]['segment']] for x in d)" <"$TMP/drive_replicas.json")" true \
    "replica path is the drive file of its segment id"
assert_eq "$(json 'all(x[0]["length"] >= 4194304 for x in d)' <"$TMP/drive_replicas.json")" true "replica length covers the chunk"
log "chunk -> segment: $(json '[x[0]["segment"] for x in d]' <"$TMP/drive_replicas.json")"

# --- the non-JSON form names the drive files ---------------------------------
text=$("$STRIPEFS" placement "$MNT/big") || fail "placement (text) failed"
for seg in $(json '" ".join(str(x[0]["segment"]) for x in d)' <"$TMP/drive_replicas.json"); do
    [[ "$text" == *"${DRIVES[$seg]}"* ]] || fail "text placement does not mention ${DRIVES[$seg]}: $text"
done
ok "text placement names the drive path of every chunk"

# --- placement on a path outside stripefs fails -------------------------------
if "$STRIPEFS" placement /etc/hostname >/dev/null 2>&1; then fail "placement /etc/hostname succeeded"; fi
ok "placement /etc/hostname exits non-zero"
if "$STRIPEFS" placement "$MNT/no-such-file" >/dev/null 2>&1; then fail "placement of a missing file succeeded"; fi
ok "placement of a missing file exits non-zero"

# --- 200 files of 100 KiB spread their chunk 0 over all drives ---------------
mkdir "$MNT/small"
for i in $(seq 1 200); do head -c $((100 * 1024)) /dev/urandom >"$MNT/small/f$i"; done
for i in $(seq 1 200); do
    placement "$MNT/small/f$i" | json "[r['segment'] for r in d['chunks'][0]['replicas'] if r['segment'] < $NDRIVES][0]"
done | sort -n | uniq -c >"$TMP/spread" || fail "placement --json of the small files failed"
log "chunk 0 per drive (count segment): $(tr -s ' \n' ' ' <"$TMP/spread")"
assert_eq "$(wc -l <"$TMP/spread")" 4 "drives used by chunk 0 of 200 small files"
min=$(awk 'NR == 1 || $1 < m {m = $1} END {print m}' "$TMP/spread")
((min >= 13)) || fail "a drive holds chunk 0 of only $min of 200 files"
ok "every drive holds chunk 0 of >= 13 files (min $min)"

# --- the URI survives a rename into another directory -------------------------
uri=$(P 'd["uri"]')
mkdir "$MNT/elsewhere"
mv "$MNT/big" "$MNT/elsewhere/renamed"
assert_eq "$(placement "$MNT/elsewhere/renamed" | json 'd["uri"]')" "$uri" "uri after mv to another directory"
cmp "$TMP/big.ref" "$MNT/elsewhere/renamed" || fail "content changed by mv"

# --- the replica byte ranges really hold the file's bytes ---------------------
unmount_pool
python3 - "$TMP/big.ref" "$TMP/big.json" "$NDRIVES" <<'EOF' || fail "drive byte ranges from placement do not hold the file's data"
import json, sys
ref = open(sys.argv[1], "rb").read()
for c in json.load(open(sys.argv[2]))["chunks"]:
    want = ref[c["offset"]:c["offset"] + c["length"]]
    for r in c["replicas"]:
        if r["segment"] >= int(sys.argv[3]):  # RAM copy
            continue
        with open(r["path"], "rb") as f:
            f.seek(r["offset"])
            if f.read(c["length"]) != want:
                sys.exit(f"chunk {c['index']}: {r['path']}@{r['offset']} differs from the file")
EOF
ok "each replica's (path, offset) in the drive file holds that chunk's bytes"
