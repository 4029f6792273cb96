#!/usr/bin/env bash
# compression_bench.sh -- what compression costs and gains for the 512x2048
# float32 layer-norm JSON answer (about 12 MB). Prints two tables:
#
#  1. zlib levels 1 and 6 on that answer's bytes (Python's zlib module is
#     the same libz the daemon links): compressed size, time per answer on
#     one core; why normd uses level 1 (server/encoding.h ENCODING_LEVEL).
#  2. normd under wrk, A/B in one run, rows interleaved (A B A B ...):
#     identity answers, gzip answers (Accept-Encoding: gzip), a gzip
#     request (Content-Encoding: gzip) with an identity answer, and gzip
#     both ways; bytes on the wire per answer and per request, req/s,
#     latency.
#
#   bench/compression_bench.sh                 # 5 s per row, 8 connections
#   DURATION=10 CONNECTIONS=16 ROUNDS=3 bench/compression_bench.sh
#
# Loopback only, so the wire is free here: the req/s columns show the CPU
# that compression takes, the bytes columns what a real network would carry.
# normd is the build from `make` (release flags: -O2, no -march=native).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-8}
WRK_THREADS=${WRK_THREADS:-2}
ROUNDS=${ROUNDS:-2}
. bench/daemon.sh zbench  # $work, $pids, free_port, start_normd
command -v wrk >/dev/null || { echo "needs wrk (apt-get install -y wrk)" >&2; exit 1; }

# The request: layer norm of 512x2048 float32, deterministic data (as
# bench/http_bench.sh), plain and gzip'd.
/usr/bin/python3 - "$work" <<'PY'
import gzip, json, random, sys
out = sys.argv[1]
random.seed(1)
rows, cols = 512, 2048
data = [round(random.gauss(0, 1), 6) for _ in range(rows * cols)]
body = json.dumps({"input": {"shape": [rows, cols], "dtype": "float32", "data": data}},
                  separators=(",", ":")).encode()
open(f"{out}/large.json", "wb").write(body)
open(f"{out}/large.json.gz", "wb").write(gzip.compress(body, 1, mtime=0))
PY

start_normd
url="http://127.0.0.1:$port/v1/norm/layer"

# One identity answer, for table 1 and as the reference the others match.
curl -sf -H "Content-Type: application/json" --data-binary "@$work/large.json" "$url" \
  -o "$work/answer.json"
curl -sf -H "Content-Type: application/json" -H "Accept-Encoding: gzip" \
  --data-binary "@$work/large.json" "$url" -o "$work/answer.gz"
/usr/bin/python3 -c "
import gzip, sys
a = open('$work/answer.json', 'rb').read()
assert gzip.decompress(open('$work/answer.gz', 'rb').read()) == a, 'gzip answer differs'
"

echo
echo "1. zlib on the 512x2048 layer-norm JSON answer ($(stat -c %s "$work/answer.json") bytes), one core"
echo
/usr/bin/python3 - "$work/answer.json" "$work/large.json" <<'PY'
import sys, time, zlib
answer = open(sys.argv[1], "rb").read()
request = open(sys.argv[2], "rb").read()
print("| input | level | compressed bytes | ratio | compress ms | compress MB/s | inflate ms |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, data in (("answer", answer), ("request", request)):
    for level in (1, 6):
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            c = zlib.compressobj(level, zlib.DEFLATED, 31)
            packed = c.compress(data) + c.flush()
            best = min(best, time.perf_counter() - t)
        inf = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            zlib.decompress(packed, 47)
            inf = min(inf, time.perf_counter() - t)
        print("| %s | %d | %d | %.2f | %.1f | %.0f | %.1f |" % (
            name, level, len(packed), len(data) / len(packed), best * 1e3,
            len(data) / best / 1e6, inf * 1e3))
PY

cat >"$work/post.lua" <<'LUA'
local f = io.open(os.getenv("BODY"), "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
local ae = os.getenv("ACCEPT_ENCODING")
if ae ~= nil and ae ~= "" then wrk.headers["Accept-Encoding"] = ae end
local ce = os.getenv("CONTENT_ENCODING")
if ce ~= nil and ce ~= "" then wrk.headers["Content-Encoding"] = ce end
LUA

to_ms() { # wrk prints 1.23ms / 456.00us / 1.20s
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.1f", n }'
}
# run_wrk BODY ACCEPT_ENCODING CONTENT_ENCODING: "req/s p50 p99 non2xx"
run_wrk() {
  local out
  out=$(BODY="$1" ACCEPT_ENCODING="$2" CONTENT_ENCODING="$3" \
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$work/post.lua" "$url")
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") ${errors:-0}"
}
# wire_bytes BODY ACCEPT_ENCODING CONTENT_ENCODING: "request answer" bytes
wire_bytes() {
  local h=(-H "Content-Type: application/json")
  [ -n "$2" ] && h+=(-H "Accept-Encoding: $2")
  [ -n "$3" ] && h+=(-H "Content-Encoding: $3")
  curl -sf "${h[@]}" --data-binary "@$1" "$url" -o /dev/null -w '%{size_upload} %{size_download}\n'
}

# label | request body | Accept-Encoding | Content-Encoding
rows=(
  "identity both ways|$work/large.json||"
  "gzip answer|$work/large.json|gzip|"
  "gzip request|$work/large.json.gz||gzip"
  "gzip both ways|$work/large.json.gz|gzip|gzip"
)

echo
printf '2. normd %s, layer norm 512x2048 JSON, %s s per row, %s connections, %s wrk threads, %s CPUs, %s rounds\n\n' \
  "$("$NORMD" --version | awk '{print $2}')" "$DURATION" "$CONNECTIONS" "$WRK_THREADS" "$(nproc)" "$ROUNDS"
printf '| case | round | request bytes | answer bytes | req/s | p50 ms | p99 ms | non-2xx |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|\n'
for round in $(seq "$ROUNDS"); do
  for r in "${rows[@]}"; do
    IFS='|' read -r label body ae ce <<<"$r"
    read -r up down < <(wire_bytes "$body" "$ae" "$ce")
    read -r rps p50 p99 err < <(run_wrk "$body" "$ae" "$ce")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$round" "${up%.*}" "${down%.*}" \
      "$rps" "$p50" "$p99" "$err"
  done
done
