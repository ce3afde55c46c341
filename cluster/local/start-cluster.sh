#!/usr/bin/env bash
# Start a Dask scheduler and workers with Dask's own CLI (`dask scheduler`, `dask worker`),
# on this machine or on several hosts over ssh. Stop them with ./stop-cluster.sh.
#
#   ./start-cluster.sh                                # scheduler + 2 workers on 127.0.0.1
#   ./start-cluster.sh --workers 4 --threads 2
#   ./start-cluster.sh --host 10.0.0.5 --worker-hosts "10.0.0.6 10.0.0.7"   # ssh to workers
#
# Options (or environment variables):
#   --host ADDR          scheduler host/interface address      (MKRK_SCHEDULER_HOST, 127.0.0.1)
#   --port N             scheduler port                         (MKRK_SCHEDULER_PORT, 8786)
#   --workers N          workers per worker host                (MKRK_WORKERS, 2)
#   --threads N          threads per worker                     (MKRK_THREADS, 1)
#   --memory-limit M     per worker, e.g. 4GiB                  (MKRK_MEMORY_LIMIT, auto)
#   --worker-hosts "H.." hosts to start workers on via ssh      (MKRK_WORKER_HOSTS, local only)
#   --run-dir DIR        pid files and logs                     (MKRK_RUN_DIR, ./dask-run)
#   --python PY          python on every host                   (MKRK_PYTHON, python3)
#   --dashboard-port N   scheduler dashboard port, 0 = any      (MKRK_DASHBOARD_PORT, 8787)
#
# Prints the scheduler address, e.g. tcp://127.0.0.1:8786; then:
#   mkrk fit data.npz --scheduler tcp://127.0.0.1:8786 --out run1
set -euo pipefail

HOST=${MKRK_SCHEDULER_HOST:-127.0.0.1}
PORT=${MKRK_SCHEDULER_PORT:-8786}
WORKERS=${MKRK_WORKERS:-2}
THREADS=${MKRK_THREADS:-1}
MEMORY=${MKRK_MEMORY_LIMIT:-auto}
WORKER_HOSTS=${MKRK_WORKER_HOSTS:-}
RUN_DIR=${MKRK_RUN_DIR:-$PWD/dask-run}
PY=${MKRK_PYTHON:-python3}
DASHBOARD_PORT=${MKRK_DASHBOARD_PORT:-8787}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --host) HOST=$2; shift 2;;
    --port) PORT=$2; shift 2;;
    --workers) WORKERS=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    --memory-limit) MEMORY=$2; shift 2;;
    --worker-hosts) WORKER_HOSTS=$2; shift 2;;
    --run-dir) RUN_DIR=$2; shift 2;;
    --python) PY=$2; shift 2;;
    --dashboard-port) DASHBOARD_PORT=$2; shift 2;;
    -h|--help) sed -n "2,22p" "$0"; exit 0;;
    *) echo "start-cluster.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done

mkdir -p "$RUN_DIR"
ADDRESS="tcp://$HOST:$PORT"
if [[ -f "$RUN_DIR/scheduler.pid" ]] && kill -0 "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null; then
  echo "start-cluster.sh: a scheduler from $RUN_DIR is already running; ./stop-cluster.sh first" >&2
  exit 2
fi

# The scheduler, bound to HOST only (the dashboard too), in the background.
"$PY" -m dask scheduler --host "$HOST" --port "$PORT" \
  --dashboard-address "$HOST:$DASHBOARD_PORT" >"$RUN_DIR/scheduler.log" 2>&1 &
echo $! >"$RUN_DIR/scheduler.pid"

# Wait until it accepts connections.
for _ in $(seq 1 120); do
  if "$PY" - "$HOST" "$PORT" <<'PYEOF' 2>/dev/null; then break; fi
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
PYEOF
  sleep 0.5
done

worker_cmd="$PY -m dask worker $ADDRESS --nworkers $WORKERS --nthreads $THREADS --memory-limit $MEMORY --no-dashboard"
if [[ -z "$WORKER_HOSTS" ]]; then
  # Local workers listen on the scheduler's interface.
  $worker_cmd --host "$HOST" >"$RUN_DIR/workers-local.log" 2>&1 &
  echo $! >"$RUN_DIR/workers-local.pid"
else
  for h in $WORKER_HOSTS; do
    # nohup on the remote host; its pid is written back here for stop-cluster.sh.
    ssh -o BatchMode=yes "$h" "nohup $worker_cmd --host $h >/tmp/mkrk-dask-worker.log 2>&1 & echo \$!" \
      >"$RUN_DIR/workers-$h.remote-pid"
  done
fi

# Wait until every worker has registered.
expected=$WORKERS
if [[ -n "$WORKER_HOSTS" ]]; then expected=$(( WORKERS * $(wc -w <<<"$WORKER_HOSTS") )); fi
"$PY" - "$ADDRESS" "$expected" <<'PYEOF'
import sys
from distributed import Client
with Client(sys.argv[1], timeout=60) as client:
    client.wait_for_workers(int(sys.argv[2]), timeout=120)
PYEOF
echo "$ADDRESS" >"$RUN_DIR/address"
echo "$ADDRESS"
