# bench/daemon.sh -- sourced by the HTTP benchmarks (http_bench.sh,
# compression_bench.sh) with a name for the scratch directory: $work (removed
# at exit, with every process listed in $pids), free_port, and start_normd.
NORMD=./build/normd
work=$(mktemp -d "/tmp/normd-$1.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

[ -x "$NORMD" ] || { echo "build first: make" >&2; exit 1; }

# A loopback port nobody listens on.
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# normd (config/normd.json, at warn, no in-flight limit) on a free port, set
# in $port once /healthz answers; its stderr in $work/normd.log. The port is
# picked here, not --port 0: at warn the daemon does not print its (info)
# startup line, so there is no port to read from it.
start_normd() {
  port=$(free_port)
  "$NORMD" --config config/normd.json --host 127.0.0.1 --port "$port" --log-level warn \
    --max-inflight 100000 2>"$work/normd.log" &
  pids+=($!)
  local up=""
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && { up=1; break; }
    sleep 0.05
  done
  [ -n "$up" ] || { cat "$work/normd.log" >&2; exit 1; }
}
