#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A 3-member etcd cluster on 127.0.0.1 for tests, kept in DIR:
#   etcd_cluster.sh start DIR      start it afresh; DIR/endpoints gets HOST:PORT,HOST:PORT,HOST:PORT
#   etcd_cluster.sh stop DIR       stop every member (by the pids in DIR)
#   etcd_cluster.sh kill DIR N     kill -9 member N (0..2)
#   etcd_cluster.sh restart DIR N  start member N again on its data
# Members are stopped only by the pids this script wrote; nothing is killed by name.
set -u
cmd=${1:?usage: etcd_cluster.sh start|stop|kill|restart DIR [N]}
dir=${2:?usage: etcd_cluster.sh start|stop|kill|restart DIR [N]}
ETCD=${ETCD:-etcd}

die() { echo "etcd_cluster.sh: $*" >&2; exit 1; }

start_member() {  # N [new|existing]
  local n=$1 state=$2
  # shellcheck disable=SC1091
  . "$dir/ports"
  local cport=CLIENT$n pport=PEER$n
  "$ETCD" --name "m$n" --data-dir "$dir/m$n" \
    --listen-client-urls "http://127.0.0.1:${!cport}" --advertise-client-urls "http://127.0.0.1:${!cport}" \
    --listen-peer-urls "http://127.0.0.1:${!pport}" --initial-advertise-peer-urls "http://127.0.0.1:${!pport}" \
    --initial-cluster "$INITIAL" --initial-cluster-token "stripefs-test-$TOKEN" --initial-cluster-state "$state" \
    --logger zap --log-outputs "$dir/m$n.log" </dev/null >>"$dir/m$n.out" 2>&1 &
  echo $! >"$dir/pid.$n"
}

wait_healthy() {  # endpoints that must answer
  local eps=$1
  for _ in $(seq 1 200); do
    if ETCDCTL_API=3 etcdctl --endpoints "$eps" --command-timeout=2s endpoint health >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

case $cmd in
  start)
    command -v "$ETCD" >/dev/null || die "no etcd binary (apt-get install etcd-server)"
    "$0" stop "$dir"  # what an interrupted run left behind
    rm -rf "$dir"
    mkdir -p "$dir"
    # Six free loopback ports, chosen by the kernel.
    read -r -a p < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
    {
      for n in 0 1 2; do echo "CLIENT$n=${p[$n]}"; echo "PEER$n=${p[$((n + 3))]}"; done
      echo "INITIAL=m0=http://127.0.0.1:${p[3]},m1=http://127.0.0.1:${p[4]},m2=http://127.0.0.1:${p[5]}"
      echo "TOKEN=$$"
    } >"$dir/ports"
    for n in 0 1 2; do start_member $n new; done
    eps="127.0.0.1:${p[0]},127.0.0.1:${p[1]},127.0.0.1:${p[2]}"
    if ! wait_healthy "$eps"; then
      "$0" stop "$dir"
      die "the cluster in $dir did not become healthy; see $dir/m*.log"
    fi
    echo "$eps" >"$dir/endpoints"
    ;;
  stop)
    for f in "$dir"/pid.*; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      rm -f "$f"
    done
    ;;
  kill)
    n=${3:?member}
    pid=$(cat "$dir/pid.$n") || die "member $n is not running"
    kill -9 "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/pid.$n"
    ;;
  restart)
    n=${3:?member}
    [ -e "$dir/pid.$n" ] && die "member $n is running"
    start_member "$n" existing
    . "$dir/ports"
    port=CLIENT$n
    wait_healthy "127.0.0.1:${!port}" || die "member $n did not come back; see $dir/m$n.log"
    ;;
  *) die "unknown command $cmd" ;;
esac
