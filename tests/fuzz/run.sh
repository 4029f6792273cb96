#!/usr/bin/env bash
# run.sh -- replays the regression inputs, then fuzzes each target for a
# bounded time, and prints one row per target: executions, coverage (the
# last "cov:" figure libFuzzer reports: edges hit), features, corpus size.
# Fails (exit 1) on any crash, leak, timeout or out-of-memory; the input is
# kept under BUILD/artifacts/<target>/ and the log's tail is printed.
#
#   tests/fuzz/run.sh BUILD SECONDS TARGET...   (make fuzz-smoke / make fuzz)
#
# The corpus grown by a run stays in BUILD/corpus/<target> (the next run
# starts from it); the committed seeds in tests/fuzz/corpus/<target> are only
# read. Move a crash's input to tests/fuzz/regressions/<target>/ once fixed.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=$1 seconds=$2
shift 2
here=tests/fuzz

dict_for() {
  case $1 in
  json | framed) echo "$here/json.dict" ;;
  request) cat "$here/http.dict" "$here/json.dict" > "$build/request.dict"
           echo "$build/request.dict" ;;
  *) echo "$here/$1.dict" ;;
  esac
}

max_len_for() {
  case $1 in
  npy) echo 4096 ;;
  config) echo 8192 ;;
  *) echo 16384 ;;
  esac
}

failed=0
rows=()
for t in "$@"; do
  bin=$build/fuzz_$t
  log=$build/fuzz_$t.log
  # 1. every committed regression input, once each
  regress=0
  if compgen -G "$here/regressions/$t/*" > /dev/null; then
    regress=$(ls "$here/regressions/$t" | wc -l)
    if ! "$bin" -timeout=10 "$here"/regressions/"$t"/* > "$build/regress_$t.log" 2>&1; then
      echo "fuzz: $t: a regression input fails again:" >&2
      tail -n 40 "$build/regress_$t.log" >&2
      failed=1
      rows+=("$(printf '%-8s %8s %10s %8s %6s %7s %8s  %s' "$t" - - - - - "$regress" "REGRESSION")")
      continue
    fi
  fi
  # 2. fuzzing, bounded by time
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 \
    -max_len="$(max_len_for "$t")" -dict="$(dict_for "$t")" \
    -artifact_prefix="$build/artifacts/$t/" -print_final_stats=1 \
    "$build/corpus/$t" "$here/corpus/$t" > "$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  last=$(grep -a -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
  rate=$(( ${execs:-0} / (seconds > 0 ? seconds : 1) ))
  result=ok
  if [ $rc -ne 0 ]; then
    result="CRASH (rc $rc)"
    failed=1
    echo "fuzz: $t crashed; input kept in $build/artifacts/$t/:" >&2
    grep -a -v '^#' "$log" | tail -n 60 >&2
  fi
  rows+=("$(printf '%-8s %8s %10s %8s %6s %7s %8s  %s' "$t" "${seconds}s" \
    "${execs:-?}" "$rate" "${cov:-?}" "${ft:-?}" "${corp:-?}/$regress" "$result")")
done

echo
printf '%-8s %8s %10s %8s %6s %7s %8s  %s\n' target time execs exec/s cov ft \
  corp/reg result
for r in "${rows[@]}"; do echo "$r"; done
bad=$(printf '%s\n' "${rows[@]}" | grep -c -E 'CRASH|REGRESSION')
echo "fuzz: $(( $# - bad )) passed, $bad failed"
exit $failed
