#!/usr/bin/env bash
# http_bench.sh -- normd under wrk beside nginx serving a static file of the
# same size as normd's response (the ceiling: the cheapest possible HTTP
# answer of that size on this machine), all in one run. Prints a table.
#
#   bench/http_bench.sh            # 10 s per row
#   DURATION=5 CONNECTIONS=32 bench/http_bench.sh
#   BASE=/path/to/other/normd bench/http_bench.sh   # A/B: its rows too
#     (with its own config, BASE_CONFIG, default the one beside it:
#     BASE/../../config/normd.json)
#
# The 1x768 JSON case runs with two bodies (the bench's own, compact, six
# decimals; and what Python's json.dumps prints for float32 values rounded
# to six decimals: 17 significant digits, ", " separators) against two
# daemons: access log on (log_level info, as `make run` with
# config/normd.json: a line per request, to a file here) and --log-level
# warn. The large cases run on both too. The JSON cases also run against
# the peer (bench/peer_fastapi.py: FastAPI + numpy on uvicorn with uvloop
# and httptools, 2 workers, what a Python user would deploy), unless
# PEER=0. A last table marks issue 20's targets met or missed, each taken
# on the access-log-on daemon (the default config): vs nginx serving the
# same answer bytes, and vs the peer.
#
# Loopback only. normd is the build from `make` (release flags: -O2, no
# -march=native). wrk and nginx share the machine's cores with normd, so
# compare the rows of one run with each other, not across machines.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
. bench/daemon.sh bench  # $work, $pids, free_port, start_normd
chmod 755 "$work"

# Request bodies: layer norm over the last dim, deterministic data, as JSON,
# as .npy, and in the binary framing (JSON header + raw float32).
/usr/bin/python3 - "$work" <<'PY'
import json, random, struct, sys
out = sys.argv[1]
random.seed(1)
for name, rows, cols in (("small", 1, 768), ("large", 512, 2048)):
    data = [round(random.gauss(0, 1), 6) for _ in range(rows * cols)]
    body = {"input": {"shape": [rows, cols], "dtype": "float32", "data": data}}
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(body, f, separators=(",", ":"))
    if name == "small":
        # what a Python user sends: float32 values (here the nearest float32
        # to each) printed by json.dumps as the doubles they are
        as_f32 = [struct.unpack("<f", struct.pack("<f", v))[0] for v in data]
        body = {"input": {"shape": [rows, cols], "dtype": "float32", "data": as_f32}}
        with open(f"{out}/small_py.json", "w") as f:
            json.dump(body, f)
    raw = struct.pack(f"<{rows * cols}f", *data)
    header = ("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols))
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    with open(f"{out}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + raw)
    meta = json.dumps({"input": {"shape": [rows, cols], "dtype": "float32",
                                 "parameters": {"binary_data_size": len(raw)}}}).encode()
    with open(f"{out}/{name}.framed", "wb") as f:
        f.write(meta + raw)
    with open(f"{out}/{name}.framed.len", "w") as f:
        f.write(str(len(meta)))
PY

# The daemons, by setting: their ports and pids.
declare -A d_port d_pid
start_normd warn "$NORMD" warn && d_port[warn]=$port d_pid[warn]=$normd_pid
start_normd info "$NORMD" info && d_port[info]=$port d_pid[info]=$normd_pid
settings=(info warn)
peer=""
if [ "${PEER:-1}" != 0 ] && /usr/bin/python3 -c 'import fastapi, uvicorn, uvloop, httptools, numpy' 2>/dev/null; then
  peer_port=$(free_port)
  /usr/bin/python3 -m uvicorn --app-dir bench peer_fastapi:app --host 127.0.0.1 --port "$peer_port" \
    --workers 2 --loop uvloop --http httptools --log-level warning 2>"$work/peer.log" &
  pids+=($!)
  for _ in $(seq 200); do
    curl -sf -o /dev/null "http://127.0.0.1:$peer_port/healthz" && { peer=peer; break; }
    sleep 0.05
  done
  [ -n "$peer" ] || echo "the peer did not start (see below); its rows are left out" >&2
  d_port[peer]=$peer_port
fi
if [ -n "${BASE:-}" ]; then
  base_config=${BASE_CONFIG:-$(dirname "$BASE")/../config/normd.json}
  start_normd warn "$BASE" base-warn "$base_config" && d_port[base-warn]=$port d_pid[base-warn]=$normd_pid
  start_normd info "$BASE" base-info "$base_config" && d_port[base-info]=$port d_pid[base-info]=$normd_pid
  settings=(info base-info warn base-warn)
fi
port=${d_port[warn]}

mkdir -p "$work/www"
# case name, request file, Content-Type, Accept, servers, targets (issue
# 20: the info daemon's req/s at least this share of nginx's, at least this
# many times the peer's; - for none)
cases=(
  "layer 1x768 JSON (bench text)|small.json|application/json|application/json|${settings[*]} $peer|0.5 8"
  "layer 1x768 JSON (json.dumps float32)|small_py.json|application/json|application/json|${settings[*]} $peer|0.5 8"
  "layer 512x2048 JSON|large.json|application/json|application/json|${settings[*]} $peer|0.2 20"
  "layer 512x2048 .npy|large.npy|application/x-npy|application/x-npy|${settings[*]}|0.6 -"
  "layer 512x2048 framed|large.framed|application/octet-stream|application/octet-stream|${settings[*]}|- -"
)
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r label file ctype accept _ _ <<<"$c"
  extra=()
  [ "$ctype" = application/octet-stream ] &&
    extra=(-H "Inference-Header-Content-Length: $(cat "$work/${file}.len")")
  curl -sf -H "Content-Type: $ctype" -H "Accept: $accept" "${extra[@]}" \
    --data-binary "@$work/$file" "http://127.0.0.1:$port/v1/norm/layer" -o "$work/www/out$i"
  i=$((i + 1))
done

nginx_port=$(free_port)
cat >"$work/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
error_log $work/nginx.err warn;
pid $work/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nginx_port;
    root $work/www;
    default_type application/json;
  }
}
NGINX
chmod -R a+rX "$work/www"
nginx -p "$work" -c "$work/nginx.conf" &
pids+=($!)
sleep 0.5

cat >"$work/post.lua" <<'LUA'
local f = io.open(os.getenv("BODY"), "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = os.getenv("CTYPE")
wrk.headers["Accept"] = os.getenv("ACCEPT")
local hl = os.getenv("HDRLEN")
if hl ~= nil and hl ~= "" then wrk.headers["Inference-Header-Content-Length"] = hl end
LUA

# run_wrk URL [lua]: prints "req/s p50 p99" with latencies in ms
run_wrk() {
  local out
  if [ $# -gt 1 ]; then
    out=$(BODY="$3" wrk --timeout 60s -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$2" "$1")
  else
    out=$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$1")
  fi
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") ${errors:-0}"
}
# Waits until normd has finished the jobs a previous row left queued (wrk
# hangs up at the end of a row, but accepted requests still run), so rows
# do not bleed into each other. The metrics request itself is in flight.
wait_idle() { # [PORT]
  for _ in $(seq 600); do
    local n
    n=$(curl -sf "http://127.0.0.1:${1:-$port}/metrics" | awk '$1 == "normd_inflight_requests" {print $2}')
    [ "${n:-2}" -le 1 ] 2>/dev/null && return 0
    sleep 0.1
  done
  echo "normd did not go idle" >&2
}
# The daemon's peak RSS (VmHWM) since the last reset_peak_rss, in MiB.
# Writing 5 to clear_refs resets the peak (Linux >= 4.0; needs the same
# user or root); without it the figure is the peak since the daemon started.
normd_pid=${d_pid[warn]}
reset_peak_rss() { echo 5 >"/proc/$normd_pid/clear_refs" 2>/dev/null || true; }
rss_kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$normd_pid/status"; }
peak_rss_mib() { awk -v k="$(rss_kib VmHWM)" 'BEGIN { printf "%.0f", k / 1024 }'; }
sleep 1.5 # the warm-up requests above are 1 s behind: the heap is trimmed
idle_rss_mib=$(awk -v k="$(rss_kib VmRSS)" 'BEGIN { printf "%.0f", k / 1024 }')
framed_peak=""
to_ms() { # wrk prints 1.23ms / 456.00us / 1.20s
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'
}

printf '\nnormd %s, %s s per row, %s connections, %s wrk threads, %s CPUs\n\n' \
  "$("$NORMD" --version | awk '{print $2}')" "$DURATION" "$CONNECTIONS" "$WRK_THREADS" "$(nproc)"
# the daemon's column: what each setting is
server_name() {
  case $1 in
  info) echo "normd, access log on (info)" ;;
  warn) echo "normd, --log-level warn" ;;
  base-info) echo "normd BASE, access log on (info)" ;;
  base-warn) echo "normd BASE, --log-level warn" ;;
  peer) echo "peer: FastAPI + numpy, 2 workers" ;;
  esac
}
printf '| case | server | req/s | p50 ms | p99 ms | non-2xx | response bytes | MB/s out | vs ceiling | peak RSS MiB |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
verdicts=()
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r label file ctype accept row_settings targets <<<"$c"
  declare -A rps=()
  hdrlen=""
  [ "$ctype" = application/octet-stream ] && hdrlen=$(cat "$work/${file}.len")
  bytes=$(stat -c %s "$work/www/out$i")
  # nginx first: the ceiling each normd row of the case is divided by
  read -r g_rps g_p50 g_p99 g_err < <(run_wrk "http://127.0.0.1:$nginx_port/out$i")
  mb_g=$(awk -v r="$g_rps" -v b="$bytes" 'BEGIN { printf "%.1f", r * b / 1e6 }')
  printf '| %s | nginx static (ceiling) | %s | %s | %s | %s | %s | %s | 1 | |\n' "$label" "$g_rps" "$g_p50" "$g_p99" "$g_err" "$bytes" "$mb_g"
  for s in $row_settings; do
    if [ "$s" != peer ]; then
      wait_idle "${d_port[$s]}"
      normd_pid=${d_pid[$s]}
      reset_peak_rss
    fi
    read -r n_rps n_p50 n_p99 n_err < <(CTYPE="$ctype" ACCEPT="$accept" HDRLEN="$hdrlen" \
      run_wrk "http://127.0.0.1:${d_port[$s]}/v1/norm/layer" "$work/post.lua" "$work/$file")
    rps[$s]=$n_rps
    n_rss=""
    [ "$s" != peer ] && n_rss=$(peak_rss_mib)
    [ "$file" = large.framed ] && [ "$s" = warn ] && framed_peak=$n_rss
    ratio=$(awk -v a="$n_rps" -v b="$g_rps" 'BEGIN { printf "%.3f", a / b }')
    mb_n=$(awk -v r="$n_rps" -v b="$bytes" 'BEGIN { printf "%.1f", r * b / 1e6 }')
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(server_name "$s")" "$n_rps" "$n_p50" "$n_p99" "$n_err" "$bytes" "$mb_n" "$ratio" "$n_rss"
  done
  # the targets of this case, on the info daemon
  read -r t_nginx t_peer <<<"$targets"
  if [ "$t_nginx" != - ]; then
    verdicts+=("$(awk -v l="$label" -v a="${rps[info]}" -v b="$g_rps" -v t="$t_nginx" \
      'BEGIN { r = a / b; printf "| %s | vs nginx >= %s | %.3f | %s |", l, t, r, (r >= t ? "met" : "missed") }')")
  fi
  if [ "$t_peer" != - ]; then
    if [ -n "${rps[peer]:-}" ]; then
      verdicts+=("$(awk -v l="$label" -v a="${rps[info]}" -v b="${rps[peer]}" -v t="$t_peer" \
        'BEGIN { if (b <= 0) { printf "| %s | vs the peer >= %sx | | not measured: the peer answered none in the row |", l, t; exit }
                 r = a / b; printf "| %s | vs the peer >= %sx | %.1fx | %s |", l, t, r, (r >= t ? "met" : "missed") }')")
    else
      verdicts+=("| $label | vs the peer >= ${t_peer}x | | not measured (no peer) |")
    fi
  fi
  i=$((i + 1))
done
normd_pid=${d_pid[warn]}
dropped=$(curl -sf "http://127.0.0.1:${d_port[info]}/metrics" | awk '$1 == "normd_log_lines_dropped_total" {print $2}')
printf '\n| case | target (access log on) | measured | |\n|---|---|---:|---|\n'
printf '%s\n' "${verdicts[@]}"
printf '\naccess log (info daemon): %s lines written, %s dropped (normd_log_lines_dropped_total)\n' \
  "$(grep -c ' info POST ' "$work/info.log" || true)" "${dropped:-?}"

# Memory (issue 8): peak RSS with CONNECTIONS concurrent framed requests of
# the large tensor, against 40 MiB + 3x the request bytes in flight; and
# the RSS once idle (normd gives its heap back after 1 s without requests),
# against the RSS before the first row.
wait_idle
sleep 2
after_mib=$(awk -v k="$(rss_kib VmRSS)" 'BEGIN { printf "%.0f", k / 1024 }')
req_bytes=$(stat -c %s "$work/large.framed")
budget=$(awk -v c="$CONNECTIONS" -v b="$req_bytes" 'BEGIN { printf "%.0f", 40 + 3 * c * b / 1048576 }')
printf '\n| memory | MiB | target |\n|---|---:|---|\n'
printf '| idle before the first row | %s | |\n' "$idle_rss_mib"
printf '| peak, %s concurrent %.1f MiB framed requests | %s | <= %s (40 + 3x in flight): %s |\n' \
  "$CONNECTIONS" "$(awk -v b="$req_bytes" 'BEGIN { print b / 1048576 }')" "$framed_peak" "$budget" \
  "$(awk -v p="$framed_peak" -v b="$budget" 'BEGIN { print (p <= b ? "met" : "missed") }')"
printf '| idle 2 s after the last row | %s | within 10%% of idle before: %s |\n' "$after_mib" \
  "$(awk -v a="$after_mib" -v i="$idle_rss_mib" 'BEGIN { print (a <= i * 1.1 + 1 ? "met" : "missed") }')"
