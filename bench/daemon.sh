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

# start_normd [LEVEL [BINARY [NAME [CONFIG]]]]: normd (CONFIG, default
# config/normd.json, at LEVEL,
# default warn; no in-flight limit) on a free port, set in $port once
# /healthz answers, its pid in $normd_pid; its stderr in $work/NAME.log
# (NAME defaults to normd). At info that is the access log, a line per
# request, as `make run` writes it. The port is picked here, not --port 0:
# at warn the daemon does not print its (info) startup line, so there is no
# port to read from it.
start_normd() {
  local level=${1:-warn} bin=${2:-$NORMD} name=${3:-normd}
  local config=${4:-config/normd.json}
  port=$(free_port)
  "$bin" --config "$config" --host 127.0.0.1 --port "$port" --log-level "$level" \
    --max-inflight 100000 2>"$work/$name.log" &
  normd_pid=$!
  pids+=($!)
  local up=""
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && { up=1; break; }
    sleep 0.05
  done
  [ -n "$up" ] || { cat "$work/$name.log" >&2; exit 1; }
}
