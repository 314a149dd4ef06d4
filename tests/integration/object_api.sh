#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The object API example program on a real pool: it runs on an unmounted
# pool in-process and on a mounted one through the daemon's object channel,
# shares the namespace with the mount (what one writes the other reads), and
# leaves fsck clean.
NO_DEFAULT_POOL=1
source "$(dirname "$0")/lib.sh"
EXAMPLE=${OBJECT_API_EXAMPLE:?set OBJECT_API_EXAMPLE to the object_api_example binary}

mkfs_pool
"$EXAMPLE" "$META" >"$TMP/out" 2>&1 || fail "the example failed: $(cat "$TMP/out")"
grep -q "^get by uri:  hello, stripefs$" "$TMP/out" || fail "unexpected output: $(cat "$TMP/out")"
grep -q "^after append: hello, stripefs!$" "$TMP/out" || fail "unexpected output: $(cat "$TMP/out")"
ok "the example stores, reads by name and URI, appends, lists and removes"

mount_pool
[[ -d "$MNT/example" ]] || fail "the directory the example made is not there"
echo "written through the mount" >"$MNT/example/from-mount"
"$EXAMPLE" "$META" >"$TMP/out" 2>&1 || fail "the example failed on a mounted pool: $(cat "$TMP/out")"
grep -q "^opened .*: daemon$" "$TMP/out" || fail "a mounted pool was not reached through its daemon: $(cat "$TMP/out")"
grep -q "^example/ holds 2 object(s)$" "$TMP/out" || fail "the API does not see the mount's file: $(cat "$TMP/out")"
[[ ! -e "$MNT/example/greeting" ]] || fail "the mount still shows the object the example removed"
ok "on a mounted pool the API goes through the daemon, sees the mount's file, and the mount sees its remove"
unmount_pool

"$EXAMPLE" "$META" >"$TMP/out" 2>&1 || fail "the example failed on a pool a mount wrote to: $(cat "$TMP/out")"
grep -q "^opened .*: in-process$" "$TMP/out" || fail "an unmounted pool was not opened in-process: $(cat "$TMP/out")"
grep -q "^example/ holds 2 object(s)$" "$TMP/out" || fail "the API does not see the mount's file: $(cat "$TMP/out")"
ok "the API sees what the mount wrote (example/ holds 2 objects)"
mount_pool
assert_eq "$(cat "$MNT/example/from-mount")" "written through the mount" "the mount's file after the API ran"
[[ ! -e "$MNT/example/greeting" ]] || fail "the object the example removed is still there"
unmount_pool
fsck_pool
