#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# git init / add / commit / modify / commit on the mount; fsck and status
# clean, before and after remount.
source "$(dirname "$0")/lib.sh"
need git

REPO=$MNT/repo
export GIT_CONFIG_NOSYSTEM=1 HOME=$TMP   # no user or system config leaks in
g() { git -C "$REPO" "$@"; }

git init -q "$REPO" || fail "git init failed"
g config user.name "stripefs test"
g config user.email "test@stripefs.invalid"
mkdir -p "$REPO/src/deep"
printf 'hello\n' >"$REPO/README"
seq 1 5000 >"$REPO/src/numbers.txt"
head -c $((300 * 1024)) /dev/urandom >"$REPO/src/deep/blob.bin"
ln -s ../README "$REPO/src/readme-link"
chmod +x "$REPO/src/numbers.txt"
g add -A && g commit -q -m "first" || fail "first commit failed"
ok "first commit"

printf 'hello again\n' >>"$REPO/README"
sed -i 's/^4242$/changed/' "$REPO/src/numbers.txt"
git -C "$REPO" mv src/deep/blob.bin src/blob-moved.bin
rm "$REPO/src/readme-link"
printf 'new\n' >"$REPO/src/new.txt"
g add -A && g commit -q -m "second" || fail "second commit failed"
ok "second commit"
g gc -q || fail "git gc failed"   # packs objects: rename-heavy, big writes
ok "git gc"

check_repo() {  # check_repo WHEN
    assert_eq "$(g log --oneline | wc -l)" 2 "git log --oneline | wc -l ($1)"
    g fsck --full --strict 2>"$TMP/fsck.err" || fail "git fsck failed ($1): $(cat "$TMP/fsck.err")"
    ok "git fsck --full --strict clean ($1)"
    assert_eq "$(g status --porcelain)" "" "git status --porcelain ($1)"
    assert_eq "$(g show HEAD~1:src/numbers.txt | sed -n 4242p)" 4242 "old content from history ($1)"
    assert_eq "$(sed -n 4242p "$REPO/src/numbers.txt")" changed "work tree content ($1)"
}
check_repo "live"

remount_pool
log "remounted"
check_repo "after remount"
g checkout -q HEAD~1 && g checkout -q - || fail "checking out the old commit and back failed"
! [[ -L "$REPO/src/readme-link" ]] || fail "symlink from old commit still present after checkout back"
assert_eq "$(g status --porcelain)" "" "git status after checkout round trip"
