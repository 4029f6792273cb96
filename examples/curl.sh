#!/usr/bin/env bash
# curl.sh -- every normd route from the shell, each answer printed.
#
#   examples/curl.sh                           # a daemon on localhost:8080
#   NORMD_URL=http://host:9000 examples/curl.sh
#   NORMD_API_KEY=... examples/curl.sh          # when the daemon has API keys
#
# The bodies are the examples of api/openapi.yaml. Needs bash and curl.
set -euo pipefail

URL="${NORMD_URL:-http://localhost:8080}"
AUTH=()
[ -n "${NORMD_API_KEY:-}" ] && AUTH=(-H "Authorization: Bearer $NORMD_API_KEY")

# show TITLE CURL-ARGS...: the title, then the answer (an HTTP error stops
# the script, after printing the problem normd answered).
show() {
  printf '\n== %s\n' "$1"
  shift
  curl -sS --fail-with-body "${AUTH[@]}" "$@"
  echo
}

# post PATH JSON: a JSON request.
post() {
  show "POST $1" "$URL$1" -H 'Content-Type: application/json' -d "$2"
}

# ---- the norms and moments (JSON) ----------------------------------------
post /v1/norm/layer '{"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]}'
post /v1/norm/layer '{"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], "variance": "unbiased", "eps_placement": "outside_sqrt", "eps": 1e-6}'
post /v1/norm/rms '{"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], "weight": [1, 1, 1, 1, 2]}'
post /v1/norm/batch '{"input": [[1, 2], [3, 4], [5, 9]], "running_mean": [0, 0], "running_var": [1, 1], "momentum": 0.1}'
post /v1/norm/group '{"input": {"shape": [1, 4, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]}, "num_groups": 2}'
post /v1/norm/instance '{"input": {"shape": [1, 2, 3], "data": [1, 2, 3, 10, 20, 30]}}'
# the backward passes: the forward's request plus grad_output (d loss / d output)
post /v1/norm/layer/backward '{"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], "grad_output": [[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]]}'
post /v1/norm/rms/backward '{"input": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]], "grad_output": [[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]], "weight": [1, 1, 1, 1, 2]}'
post /v1/norm/batch/backward '{"input": [[1, 2], [3, 4], [5, 9]], "grad_output": [[1, 0], [0, 1], [0, 0]], "weight": [2, 3], "bias": [0, 1]}'
post /v1/norm/group/backward '{"input": {"shape": [1, 4, 2], "data": [1, 2, 3, 4, 5, 6, 7, 8]}, "grad_output": {"shape": [1, 4, 2], "data": [1, 0, 0, 0, 0, 0, 0, 1]}, "num_groups": 2, "weight": [1, 1, 2, 2], "bias": [0, 0, 0, 1]}'
post /v1/norm/instance/backward '{"input": {"shape": [1, 2, 3], "data": [1, 2, 3, 10, 20, 30]}, "grad_output": {"shape": [1, 2, 3], "data": [1, 0, 0, 0, 1, 0]}, "weight": [1, 2], "bias": [0, 1]}'
# the rest of the family: Lp, local response and mean-variance normalization
post /v1/norm/lp '{"input": {"shape": [2, 3], "data": [3, 4, 0, 1, 2, 2]}, "p": 1, "axis": 0}'
post /v1/norm/lrn '{"input": {"shape": [1, 4, 1], "data": [1, 2, 3, 4]}, "size": 2, "alpha": 2, "beta": 0.5, "convention": "onnx"}'
post /v1/norm/mvn '{"input": {"shape": [2, 2, 1, 2], "data": [1, 2, 3, 4, 5, 6, 7, 9]}}'
post /v1/norm/lp/backward '{"input": {"shape": [2, 3], "data": [3, 4, 0, 1, 2, 2]}, "grad_output": {"shape": [2, 3], "data": [1, 0, 0, 0, 1, 0]}}'
post /v1/norm/lrn/backward '{"input": {"shape": [1, 4, 1], "data": [1, 2, 3, 4]}, "grad_output": {"shape": [1, 4, 1], "data": [1, 0, 0, 1]}, "size": 2, "alpha": 2, "beta": 0.5}'
post /v1/norm/mvn/backward '{"input": {"shape": [2, 2, 1, 2], "data": [1, 2, 3, 4, 5, 6, 7, 9]}, "grad_output": {"shape": [2, 2, 1, 2], "data": [1, 0, 0, 0, 0, 0, 0, 1]}}'
post /v1/moments '{"input": [[1, 2], [3, 4], [5, 9]], "layout": "channels"}'
post /v1/moments/merge '{"parts": [{"count": [5], "mean": [3], "m2": [10]}, {"count": [5], "mean": [6], "m2": [40]}]}'
post /v1/residual/simulate '{"tokens": 4, "d": 8, "layers": 3}'

# ---- binary bodies ----------------------------------------------------------
# float32 little-endian bytes of 1 2 3 4 5 2 4 6 8 10, as printf escapes
X='\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40'
X="$X"'\x00\x00\x00\x40\x00\x00\x80\x40\x00\x00\xc0\x40\x00\x00\x00\x41\x00\x00\x20\x41'

# A .npy file (what numpy.save writes): magic, version 1.0, the header dict
# padded with spaces to a multiple of 64 bytes, then the data.
dict="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 5), }"
pad=$(( (64 - (10 + ${#dict} + 1) % 64) % 64 ))
hlen=$(( ${#dict} + pad + 1 ))
npy=$(mktemp)
framed=$(mktemp)
answer=$(mktemp)
trap 'rm -f "$npy" "$framed" "$answer"' EXIT
{
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
  printf '%s%*s\n' "$dict" "$pad" ''
  printf "$X"
} >"$npy"
# the .npy input, settings in the query string; the answer as JSON
show "POST /v1/norm/layer (.npy body)" "$URL/v1/norm/layer?eps=1e-5&return=output,stats" \
  -H 'Content-Type: application/x-npy' -H 'Accept: application/json' --data-binary @"$npy"

# The binary framing: a JSON header of Inference-Header-Content-Length bytes,
# then the raw tensors; the answer is framed too (output as raw float32).
header='{"input":{"shape":[2,5],"dtype":"float32","parameters":{"binary_data_size":40}}}'
{ printf '%s' "$header"; printf "$X"; } >"$framed"
printf '\n== POST /v1/norm/layer (binary framing)\n'
hl=$(curl -sS --fail-with-body "${AUTH[@]}" -D - -o "$answer" "$URL/v1/norm/layer" \
  -H 'Content-Type: application/octet-stream' \
  -H "Inference-Header-Content-Length: ${#header}" --data-binary @"$framed" |
  tr -d '\r' | sed -n 's/^inference-header-content-length: *//Ip')
head -c "$hl" "$answer"   # the JSON header of the answer
printf '\noutput: '
tail -c +$((hl + 1)) "$answer" | od -An -v -tf4 | tr -s ' \n' ' '   # its raw float32s
echo

# ---- an error: RFC 9457 problem details ---------------------------------
printf '\n== POST /v1/norm/layer (a typo: 422)\n'
curl -sS "${AUTH[@]}" "$URL/v1/norm/layer" -H 'Content-Type: application/json' \
  -d '{"input": [1, 2], "epsilon": 1}' -w ' (HTTP %{http_code})\n'

# ---- service routes ---------------------------------------------------------
show "GET /healthz" "$URL/healthz"
show "GET /readyz" "$URL/readyz"
show "GET /v1/info" "$URL/v1/info"
printf '\n== GET /metrics (first lines)\n'
curl -sS --fail-with-body "${AUTH[@]}" "$URL/metrics" | sed -n 1,4p
printf '\n== GET /openapi.yaml (first lines)\n'
curl -sS --fail-with-body "${AUTH[@]}" "$URL/openapi.yaml" | sed -n 1,3p
printf '\n== GET / (the visualizer)\n'
curl -sS --fail "${AUTH[@]}" -o /dev/null -w 'HTTP %{http_code}, %{content_type}, %{size_download} bytes\n' "$URL/"
printf '\n== GET /normd.js and /normd.mjs (the JavaScript client)\n'
curl -sS --fail "${AUTH[@]}" -o /dev/null -w 'HTTP %{http_code}, %{content_type}, %{size_download} bytes\n' "$URL/normd.js"
curl -sS --fail "${AUTH[@]}" -o /dev/null -w 'HTTP %{http_code}, %{content_type}, %{size_download} bytes\n' "$URL/normd.mjs"
printf '\n== HEAD /healthz and OPTIONS /v1/norm/layer (CORS preflight)\n'
curl -sS --fail-with-body "${AUTH[@]}" -I "$URL/healthz" | sed -n 1p
curl -sS --fail-with-body -X OPTIONS -D - -o /dev/null "$URL/v1/norm/layer" -H 'Origin: https://app.example' |
  tr -d '\r' | grep -iE '^(HTTP|access-control-allow-(origin|methods))'

# ---- KServe v2 --------------------------------------------------------------
show "GET /v2" "$URL/v2"
code() { curl -sS "${AUTH[@]}" -o /dev/null -w '%{http_code}' "$URL$1"; }
printf '\n== v2 health: live %s, ready %s, model ready %s, version 1 ready %s\n' \
  "$(code /v2/health/live)" "$(code /v2/health/ready)" \
  "$(code /v2/models/layer_norm/ready)" "$(code /v2/models/layer_norm/versions/1/ready)"
show "GET /v2/models/layer_norm" "$URL/v2/models/layer_norm"
show "GET /v2/models/layer_norm/versions/1" "$URL/v2/models/layer_norm/versions/1"
post /v2/models/layer_norm/infer '{"id": "textbook-1", "inputs": [{"name": "input", "shape": [2, 5], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 2, 4, 6, 8, 10]}]}'
post /v2/models/group_norm/versions/1/infer '{"inputs": [{"name": "input", "shape": [1, 4, 2], "datatype": "FP64", "data": [1, 2, 3, 4, 5, 6, 7, 8]}], "parameters": {"num_groups": 2}}'
show "GET /v2/models/layer_norm_backward" "$URL/v2/models/layer_norm_backward"
post /v2/models/layer_norm_backward/infer '{"inputs": [{"name": "input", "shape": [2, 5], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 2, 4, 6, 8, 10]}, {"name": "grad_output", "shape": [2, 5], "datatype": "FP32", "data": [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]}]}'

# Triton's extensions: the repository index, a model's configuration, the
# statistics (of every model, and of one), and the refusals (models are built
# in; trace, logging and shared memory are not implemented): {"error"} each.
post /v2/repository/index '{}'
show "GET /v2/models/layer_norm/config" "$URL/v2/models/layer_norm/config"
show "GET /v2/models/layer_norm/versions/1/config" "$URL/v2/models/layer_norm/versions/1/config"
show "GET /v2/models/stats" "$URL/v2/models/stats"
show "GET /v2/models/layer_norm/stats" "$URL/v2/models/layer_norm/stats"
show "GET /v2/models/layer_norm/versions/1/stats" "$URL/v2/models/layer_norm/versions/1/stats"
refused() { # METHOD PATH: the status and the v2 error object
  printf '\n== %s %s\n' "$1" "$2"
  curl -sS "${AUTH[@]}" -X "$1" -w ' (HTTP %{http_code})\n' "$URL$2"
}
refused POST /v2/repository/models/layer_norm/load
refused POST /v2/repository/models/layer_norm/unload
refused GET /v2/trace/setting
refused GET /v2/models/layer_norm/trace/setting
refused GET /v2/logging
refused GET /v2/systemsharedmemory/status
refused GET /v2/systemsharedmemory/region/r0/status
refused POST /v2/systemsharedmemory/region/r0/register
refused POST /v2/systemsharedmemory/region/r0/unregister
refused POST /v2/systemsharedmemory/unregister
refused GET /v2/cudasharedmemory/status
refused GET /v2/cudasharedmemory/region/r0/status
refused POST /v2/cudasharedmemory/region/r0/register
refused POST /v2/cudasharedmemory/region/r0/unregister
refused POST /v2/cudasharedmemory/unregister
