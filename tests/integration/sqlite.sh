#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# sqlite3 on the mount: one big transaction, many small ones, integrity_check,
# before and after remount.
source "$(dirname "$0")/lib.sh"
need sqlite3

DB=$MNT/db/test.sqlite
mkdir "$MNT/db"
sqlite3 "$DB" <<'EOF' || fail "creating the table / inserting 20,000 rows failed"
CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL, s TEXT NOT NULL);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t (id, v, s) SELECT i, i * 3, printf('row-%d-%s', i, hex(randomblob(16))) FROM n;
COMMIT;
EOF
ok "created table and inserted 20,000 rows in one transaction"

# 200 single-row transactions (each autocommit INSERT commits and syncs on its own).
for i in $(seq 20001 20200); do echo "INSERT INTO t (id, v, s) VALUES ($i, $((i * 3)), 'single-$i');"; done \
    | sqlite3 "$DB" || fail "200 single-row transactions failed"
ok "200 single-row transactions committed"

SUM=$((3 * 20200 * 20201 / 2))
check_db() {  # check_db WHEN EXPECTED_SUM
    assert_eq "$(sqlite3 "$DB" 'SELECT count(*) FROM t;')" 20200 "row count ($1)"
    assert_eq "$(sqlite3 "$DB" 'SELECT sum(v) FROM t;')" "$2" "sum(v) ($1)"
    assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM t WHERE s LIKE 'single-%';")" 200 "single-row inserts ($1)"
    assert_eq "$(sqlite3 "$DB" 'SELECT s FROM t WHERE id = 20150;')" single-20150 "row 20150 ($1)"
    assert_eq "$(sqlite3 "$DB" 'PRAGMA integrity_check;')" ok "PRAGMA integrity_check ($1)"
}
check_db "live" "$SUM"

# An update + delete in one transaction, then a rolled-back one that must leave no trace.
sqlite3 "$DB" "BEGIN; UPDATE t SET v = v + 1 WHERE id <= 1000; DELETE FROM t WHERE id > 20100; COMMIT;" \
    || fail "update/delete transaction failed"
sqlite3 "$DB" "BEGIN; DELETE FROM t; ROLLBACK;" || fail "rolled-back transaction failed"
sqlite3 "$DB" "INSERT INTO t (id, v, s) SELECT id + 100, v + 300, 'single-' || (id + 100) FROM t WHERE id > 20000 AND id <= 20100;" \
    || fail "re-insert failed"
ok "update/delete, rollback and re-insert ran"
[[ ! -e "$DB-journal" ]] || fail "rollback journal $DB-journal left behind"
ok "no rollback journal left behind"
check_db "after update" $((SUM + 1000))  # the update added 1 to 1,000 rows

remount_pool
log "remounted"
check_db "after remount" $((SUM + 1000))
