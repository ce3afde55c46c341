#!/usr/bin/env bash
# Stop what start-cluster.sh started (the pids recorded in its run directory).
#   ./stop-cluster.sh                 # the cluster on port 8786 (MKRK_SCHEDULER_PORT)
#   ./stop-cluster.sh --port 8800     # the one started with --port 8800
#   ./stop-cluster.sh --run-dir DIR   # the one started with --run-dir DIR
set -uo pipefail
PORT=${MKRK_SCHEDULER_PORT:-8786}
RUN_DIR=${MKRK_RUN_DIR:-}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR=$2; shift 2;;
    --port) PORT=$2; shift 2;;
    -h|--help) sed -n "2,5p" "$0"; exit 0;;
    *) echo "stop-cluster.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
RUN_DIR=${RUN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mkrk-dask/cluster-$PORT}
[[ -d "$RUN_DIR" ]] || { echo "stop-cluster.sh: no run directory $RUN_DIR" >&2; exit 2; }

stop_pid() {  # TERM, then KILL after 10 s
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
}

for f in "$RUN_DIR"/workers-*.remote-pid; do
  [[ -e "$f" ]] || continue
  h=$(basename "$f" .remote-pid); h=${h#workers-}
  ssh -o BatchMode=yes "$h" "kill -TERM $(cat "$f")" 2>/dev/null || true
  rm -f "$f"
done
for f in "$RUN_DIR"/workers-local.pid "$RUN_DIR"/scheduler.pid; do
  [[ -e "$f" ]] || continue
  stop_pid "$(cat "$f")"
  rm -f "$f"
done
rm -f "$RUN_DIR/address"
echo "stopped"
