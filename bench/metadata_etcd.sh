#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Metadata speed of a pool on etcd against the same pool on RocksDB, in one
# run: it starts a 3-member etcd cluster on 127.0.0.1 (tests/support/
# etcd_cluster.sh), formats and mounts one pool of each kind on file drives,
# and runs metadata_bench over both mounts, interleaved, median of --runs.
#
#   bench/metadata_etcd.sh [--build DIR] [--dir DIR] [metadata_bench options...]
#
# --build names the build tree (default ./build); --dir is where the drive
# files, the RocksDB store and etcd's data go (default a new directory in
# /dev/shm, so neither store waits on a disk: the figures compare the two
# stores' protocols, not the backing's fsync). Every option after those goes to
# metadata_bench (for example --files 5000 --runs 3 --threads 4 --json F).
# It stops what it started, by pid, whatever happens.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build
base=
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --dir) base=$2; shift 2 ;;
    *) break ;;
  esac
done
STRIPEFS=${STRIPEFS:-$build/tools/stripefs}
BENCH=$build/bench/metadata_bench
[[ -x "$STRIPEFS" && -x "$BENCH" ]] || { echo "metadata_etcd.sh: build stripefs and metadata_bench in $build first" >&2; exit 2; }
base=${base:-$(mktemp -d /dev/shm/stripefs-mdetcd.XXXXXX)}
cluster=$base/etcd
cluster_sh=$here/../tests/support/etcd_cluster.sh
mounted=()

cleanup() {
  set +e
  local m
  for m in "${mounted[@]}"; do timeout 60 fusermount3 -u "$m" || timeout 10 fusermount3 -uz "$m"; done
  sleep 1  # the daemons write their last commits before they exit
  [[ -d "$cluster" ]] && bash "$cluster_sh" stop "$cluster"
  rm -rf "$base"
}
trap cleanup EXIT

bash "$cluster_sh" start "$cluster" >/dev/null
etcd_meta="etcd://$(cat "$cluster/endpoints")/metadata-bench"
rocks_meta=$base/rocks-meta

"$STRIPEFS" mkfs --meta "$rocks_meta" --drive "$base/rocks.img:2G" >/dev/null
"$STRIPEFS" mkfs --meta "$etcd_meta" --drive "$base/etcd.img:2G" >/dev/null
mkdir -p "$base/rocksdb" "$base/etcd-mnt"
timeout 60 "$STRIPEFS" mount "$rocks_meta" "$base/rocksdb"
mounted+=("$base/rocksdb")
timeout 60 "$STRIPEFS" mount "$etcd_meta" "$base/etcd-mnt" -o "state=$base/etcd-state"
mounted+=("$base/etcd-mnt")

echo "backing: drive files, RocksDB and etcd's data in $base ($(df --output=fstype "$base" | tail -1))"
timeout 1800 "$BENCH" "$@" "rocksdb=$base/rocksdb" "etcd=$base/etcd-mnt"
