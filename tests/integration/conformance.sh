#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# POSIX conformance beyond plain I/O (conformance.py says what), on a real
# mount, then fsck: whatever those calls did, the pool stays consistent.
source "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/conformance.py" "$MNT" || fail "conformance checks failed"
unmount_pool
fsck_pool
