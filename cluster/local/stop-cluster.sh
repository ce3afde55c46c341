#!/usr/bin/env bash
# Stop what start-cluster.sh started (the pids recorded in its run directory).
#   ./stop-cluster.sh [--run-dir DIR]
set -uo pipefail
RUN_DIR=${MKRK_RUN_DIR:-$PWD/dask-run}
if [[ "${1:-}" == "--run-dir" ]]; then RUN_DIR=$2; fi
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
