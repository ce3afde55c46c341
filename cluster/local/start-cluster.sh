#!/usr/bin/env bash
# Start a Dask scheduler and workers with Dask's own CLI (`dask scheduler`, `dask worker`),
# on this machine or on several hosts over ssh. Stop them with ./stop-cluster.sh.
#
#   ./start-cluster.sh                                # scheduler + 2 workers on 127.0.0.1
#   ./start-cluster.sh --workers 4 --threads 2
#   ./start-cluster.sh --tls-dir certs                # over tls:// (certs: ../tls/make-certs.sh)
#   ./start-cluster.sh --host 10.0.0.5 --worker-hosts "10.0.0.6 10.0.0.7" --tls-dir certs
#
# Options (or environment variables):
#   --host ADDR          interface everything listens on        (MKRK_SCHEDULER_HOST, 127.0.0.1)
#   --port N             scheduler port                         (MKRK_SCHEDULER_PORT, 8786)
#   --workers N          workers per worker host                (MKRK_WORKERS, 2)
#   --threads N          threads per worker                     (MKRK_THREADS, 1)
#   --memory-limit M     per worker, e.g. 4GiB                  (MKRK_MEMORY_LIMIT, auto)
#   --worker-hosts "H.." hosts to start workers on via ssh      (MKRK_WORKER_HOSTS, local only)
#   --run-dir DIR        pid files and logs                     (MKRK_RUN_DIR,
#                        default ${XDG_CACHE_HOME:-~/.cache}/mkrk-dask/cluster-PORT)
#   --python PY          python on every host                   (MKRK_PYTHON, python3)
#   --dashboard-port N   scheduler dashboard port, 0 = any      (MKRK_DASHBOARD_PORT, 8787)
#   --tls-dir DIR        tls:// with the certificates of ../tls/make-certs.sh (MKRK_TLS_DIR)
#
# Every listener (scheduler, its dashboard, workers, nannies, the workers' HTTP servers)
# binds --host only: 127.0.0.1 unless you give another interface. Prints the scheduler
# address, e.g. tcp://127.0.0.1:8786; then:
#   mkrk fit data.npz --scheduler tcp://127.0.0.1:8786 --out run1
# Exit codes: 0 started; 2 a bad option or a port in use; 1 the cluster did not come up.
set -euo pipefail

HOST=${MKRK_SCHEDULER_HOST:-127.0.0.1}
PORT=${MKRK_SCHEDULER_PORT:-8786}
WORKERS=${MKRK_WORKERS:-2}
THREADS=${MKRK_THREADS:-1}
MEMORY=${MKRK_MEMORY_LIMIT:-auto}
WORKER_HOSTS=${MKRK_WORKER_HOSTS:-}
RUN_DIR=${MKRK_RUN_DIR:-}
PY=${MKRK_PYTHON:-python3}
DASHBOARD_PORT=${MKRK_DASHBOARD_PORT:-8787}
TLS_DIR=${MKRK_TLS_DIR:-}

fail() { echo "start-cluster.sh: $2" >&2; exit "$1"; }

while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 || "$1" == -h || "$1" == --help ]] || fail 2 "option $1 needs a value (see --help)"
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
    --tls-dir) TLS_DIR=$2; shift 2;;
    -h|--help) sed -n "2,29p" "$0"; exit 0;;
    *) fail 2 "unknown option $1 (see --help)";;
  esac
done
[[ "$PORT" =~ ^[0-9]+$ && "$PORT" -gt 0 ]] || fail 2 "--port must be a port number, got '$PORT'"
RUN_DIR=${RUN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mkrk-dask/cluster-$PORT}

# The ports must be free: a scheduler that cannot bind would otherwise leave this script
# waiting for workers that never register.
port_free() {
  "$PY" - "$1" "$2" <<'PYEOF'
import socket, sys
with socket.socket() as s:
    try:
        s.bind((sys.argv[1], int(sys.argv[2])))
    except OSError as err:
        sys.exit(err.strerror or str(err))
PYEOF
}
why=$(port_free "$HOST" "$PORT" 2>&1) || fail 2 "$HOST:$PORT is already in use or cannot be bound ($why); choose another --port or stop what listens there"
if [[ "$DASHBOARD_PORT" != 0 ]]; then
  why=$(port_free "$HOST" "$DASHBOARD_PORT" 2>&1) || fail 2 "dashboard port $HOST:$DASHBOARD_PORT is already in use ($why); choose --dashboard-port N (0: any free port)"
fi

if [[ -f "$RUN_DIR/scheduler.pid" ]] && kill -0 "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null; then
  fail 2 "a scheduler from $RUN_DIR is already running; ./stop-cluster.sh --run-dir $RUN_DIR first"
fi
mkdir -p "$RUN_DIR"

PROTOCOL=tcp
SCHEDULER_TLS=()
WORKER_TLS=()
if [[ -n "$TLS_DIR" ]]; then
  for f in ca.pem scheduler.pem scheduler-key.pem worker.pem worker-key.pem client.pem client-key.pem; do
    [[ -f "$TLS_DIR/$f" ]] || fail 2 "--tls-dir $TLS_DIR has no $f (make them with cluster/tls/make-certs.sh $TLS_DIR)"
  done
  TLS_DIR=$(cd "$TLS_DIR" && pwd)
  PROTOCOL=tls
  SCHEDULER_TLS=(--protocol tls --tls-ca-file "$TLS_DIR/ca.pem" --tls-cert "$TLS_DIR/scheduler.pem" --tls-key "$TLS_DIR/scheduler-key.pem")
  WORKER_TLS=(--protocol tls --tls-ca-file "$TLS_DIR/ca.pem" --tls-cert "$TLS_DIR/worker.pem" --tls-key "$TLS_DIR/worker-key.pem")
fi
ADDRESS="$PROTOCOL://$HOST:$PORT"

# The scheduler, bound to HOST only (the dashboard too), in the background.
"$PY" -m dask scheduler --host "$HOST" --port "$PORT" "${SCHEDULER_TLS[@]}" \
  --dashboard-address "$HOST:$DASHBOARD_PORT" >"$RUN_DIR/scheduler.log" 2>&1 &
echo $! >"$RUN_DIR/scheduler.pid"

# Wait until it accepts connections (or has died).
up=0
for _ in $(seq 1 120); do
  kill -0 "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null || break
  if "$PY" - "$HOST" "$PORT" <<'PYEOF' 2>/dev/null; then up=1; break; fi
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
PYEOF
  sleep 0.5
done
if [[ $up != 1 ]]; then
  kill "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null || true
  rm -f "$RUN_DIR/scheduler.pid"
  fail 1 "the scheduler did not start: $(grep -m1 -iE 'error|exception' "$RUN_DIR/scheduler.log" || tail -n1 "$RUN_DIR/scheduler.log") (log: $RUN_DIR/scheduler.log)"
fi

# Workers (each with a nanny) listen on HOST; their HTTP servers (/health, /metrics) too.
worker_args=(--nworkers "$WORKERS" --nthreads "$THREADS" --memory-limit "$MEMORY" --no-dashboard "${WORKER_TLS[@]}")
if [[ -z "$WORKER_HOSTS" ]]; then
  "$PY" -m dask worker "$ADDRESS" "${worker_args[@]}" --host "$HOST" \
    --dashboard-address "$HOST:0" >"$RUN_DIR/workers-local.log" 2>&1 &
  echo $! >"$RUN_DIR/workers-local.pid"
else
  for h in $WORKER_HOSTS; do
    # nohup on the remote host (the certificates must be at the same path there); its pid
    # is written back here for stop-cluster.sh.
    ssh -o BatchMode=yes "$h" "nohup $PY -m dask worker $ADDRESS ${worker_args[*]} --host $h --dashboard-address $h:0 >/tmp/mkrk-dask-worker.log 2>&1 & echo \$!" \
      >"$RUN_DIR/workers-$h.remote-pid"
  done
fi

# Wait until every worker has registered.
expected=$WORKERS
if [[ -n "$WORKER_HOSTS" ]]; then expected=$(( WORKERS * $(wc -w <<<"$WORKER_HOSTS") )); fi
if ! "$PY" - "$ADDRESS" "$expected" "$TLS_DIR" >>"$RUN_DIR/scheduler.log" 2>&1 <<'PYEOF'
import sys
from distributed import Client
from distributed.security import Security
address, expected, tls = sys.argv[1], int(sys.argv[2]), sys.argv[3]
security = None
if tls:
    security = Security(tls_ca_file=f"{tls}/ca.pem", tls_client_cert=f"{tls}/client.pem",
                        tls_client_key=f"{tls}/client-key.pem", require_encryption=True)
with Client(address, timeout=60, security=security) as client:
    client.wait_for_workers(expected, timeout=120)
PYEOF
then
  fail 1 "the workers did not register with $ADDRESS within 120 s (logs in $RUN_DIR; stop with ./stop-cluster.sh --run-dir $RUN_DIR)"
fi
echo "$ADDRESS" >"$RUN_DIR/address"
echo "start-cluster.sh: $expected worker(s) at $ADDRESS; logs and pids in $RUN_DIR" >&2
echo "$ADDRESS"
