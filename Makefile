# normd -- the single entry point: make, make run, make test, make bench.
# OPTIMIZATION and CFLAGS may be overridden: make OPTIMIZATION=-O0 CFLAGS_EXTRA=-g

CC ?= gcc
OPTIMIZATION ?= -O2
WARN := -Wall -Wextra -Werror
CFLAGS ?= -std=c11 $(OPTIMIZATION) $(WARN) -g -D_GNU_SOURCE $(CFLAGS_EXTRA)
PKG_CONFIG ?= pkg-config
BUILD ?= build
VERSION := 0.1.0
REVISION := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

CORE_SRC := $(wildcard core/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libnormcore.a

SERVER_PKGS := libmicrohttpd jansson libuv gnutls zlib
SERVER_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(SERVER_PKGS) 2>/dev/null) \
                -DNORMD_VERSION='"$(VERSION)"' -DNORMD_REVISION='"$(REVISION)"'
SERVER_LIBS = $(shell $(PKG_CONFIG) --libs $(SERVER_PKGS) 2>/dev/null) -lpthread -lm
# server/codec/: the wire formats, bytes <-> request_t / result_t.
SERVER_INC := -Iserver -Iserver/codec
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c server/codec/*.c))
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o)
SERVER_LIB := $(BUILD)/libnormd.a
NORMD := $(BUILD)/normd

UNIT_SRC := $(wildcard tests/unit/check_*.c tests/unit/codec/check_*.c)
UNIT_BIN := $(BUILD)/check_unit
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

.PHONY: all run test unit-test blackbox-test browser-test bench clean deps fixtures

all: $(NORMD) $(UNIT_BIN)

$(BUILD)/core/%.o: core/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icore -MMD -MP -c $< -o $@

$(BUILD)/server/%.o: server/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SERVER_CFLAGS) -Icore $(SERVER_INC) -MMD -MP -c $< -o $@

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SERVER_CFLAGS) -Icore $(SERVER_INC) -Itests/unit -MMD -MP -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	$(AR) rcs $@ $^

$(SERVER_LIB): $(SERVER_OBJ)
	$(AR) rcs $@ $^

# The files that print the revision rebuild when it changes.
REVISION_FILE := $(BUILD)/revision
$(shell mkdir -p $(BUILD); echo '$(REVISION)' | cmp -s - $(REVISION_FILE) 2>/dev/null || echo '$(REVISION)' > $(REVISION_FILE))
$(BUILD)/server/main.o $(BUILD)/server/http_get.o: $(REVISION_FILE)

$(NORMD): $(BUILD)/server/main.o $(SERVER_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(SERVER_LIBS)

$(UNIT_BIN): $(UNIT_SRC:%.c=$(BUILD)/%.o) $(SERVER_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(CHECK_LIBS) $(SERVER_LIBS)

deps:
	@scripts/install-deps.sh build

run: deps
	$(MAKE) $(NORMD)
	./$(NORMD) --config config/normd.json

# The unit tests once per kernel table this CPU can run (NORM_SIMD forces
# one; an AVX512-BF16 CPU picks avx512bf16 by itself), so the base, AVX2 and
# AVX-512 loops, and the streaming stores of the AVX-512 ones, are all
# tested. `check_unit --simd` names the table NORM_SIMD gives; tables the CPU
# lacks are named and skipped before the runs, so each run closes with
# Check's summary line. Any failing run fails the target. bench/check_kern
# runs first (a few seconds): the kernels' conversions and the float-lane
# bfloat16 paths against the double ones, bit for bit.
UNIT_ISAS := base avx2 avx512 avx512bf16
unit-test: $(UNIT_BIN) $(BUILD)/check_kern
	@echo "unit-test: $(BUILD)/check_kern (every kernel table's conversions, and"\
	  "the float-lane paths bit for bit against the double ones)"; \
	./$(BUILD)/check_kern || exit 1; \
	run=; for isa in $(UNIT_ISAS); do \
	  got=$$(NORM_SIMD=$$isa $(UNIT_BIN) --simd) || exit 1; \
	  if [ "$$got" = "$$isa" ]; then run="$$run $$isa"; \
	  else echo "unit-test: $$isa skipped: not supported by this CPU" \
	    "(NORM_SIMD=$$isa runs $$got)"; fi; \
	done; \
	[ -n "$$run" ] || { echo "unit-test: no kernel table to test" >&2; exit 1; }; \
	rc=0; for isa in $$run; do \
	  echo "unit-test: NORM_SIMD=$$isa $(UNIT_BIN)"; \
	  NORM_SIMD=$$isa $(UNIT_BIN) || rc=1; \
	done; exit $$rc

# examples/client.c (libcurl + jansson), run by tests/contract/test_examples.py.
EXAMPLE_CLIENT := $(BUILD)/examples/client
EXAMPLE_PKGS := libcurl jansson
$(EXAMPLE_CLIENT): examples/client.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(shell $(PKG_CONFIG) --cflags $(EXAMPLE_PKGS) 2>/dev/null) -o $@ $< \
	  $(shell $(PKG_CONFIG) --libs $(EXAMPLE_PKGS) 2>/dev/null)

# Starts the real daemon on ephemeral ports and talks HTTP to it (pytest):
# the black-box suite, then the contract tests (api/openapi.yaml against the
# daemon, its redocly lint, the README's examples, the clients in examples/)
# in the same pytest run, so its summary stays the last line.
blackbox-test: $(NORMD) $(EXAMPLE_CLIENT)
	/usr/bin/python3 -m pytest -q tests/blackbox tests/contract

# The Python client (clients/python, package normd) against the live daemon:
# every method, dtype and transport, errors, retries, the offline venv install.
.PHONY: python-client-test
python-client-test: $(NORMD)
	PYTHONPATH=clients/python /usr/bin/python3 -m pytest -q clients/python/tests

# web/normd.js, the JavaScript client, under Node against a live daemon
# (node:test: every operation with a numeric check, dtypes, errors); then
# the teaching page (web/index.html), which runs on it, in Debian's chromium, driven by
# playwright-core from npm (pinned by tests/browser/package-lock.json,
# installed into tests/browser/node_modules, never committed; no browser is
# downloaded): its seven lessons and their quizzes against a live daemon,
# in English and 简体中文 (every visible string from the two string tables,
# no English left on the Chinese page), every number checked against the
# API, a clean console, examples/embed.html on a second origin drawing from
# the daemon, screenshots in $(BUILD)/screenshots.
# Closes with "browser: N passed, M failed".
BROWSER_DIR := tests/browser
$(BROWSER_DIR)/node_modules/.installed: $(BROWSER_DIR)/package.json $(BROWSER_DIR)/package-lock.json
	cd $(BROWSER_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

browser-test:
	@scripts/install-deps.sh browser
	$(MAKE) --no-print-directory $(NORMD) $(BROWSER_DIR)/node_modules/.installed
	NORMD_BIN=$(NORMD) node --test --test-reporter=spec $(BROWSER_DIR)/normd_js.test.mjs
	NORMD_BIN=$(NORMD) SCREENSHOTS=$(BUILD)/screenshots node $(BROWSER_DIR)/run.mjs

# Installs what is missing, runs the unit tests, the browser test, then the
# black-box suite; pytest's summary line closes the run.
test:
	@scripts/install-deps.sh test
	$(MAKE) --no-print-directory unit-test
	$(MAKE) --no-print-directory browser-test
	$(MAKE) --no-print-directory blackbox-test
	$(MAKE) --no-print-directory python-client-test

# Benchmark and exactness programs (bench/), built with the release flags:
# -O2, no -march=native (the kernels pick AVX-512 / AVX2 at run time).
.PHONY: bench-check
BENCH_BIN := $(BUILD)/kernel_bench $(BUILD)/check_kern $(BUILD)/fmt_sweep \
             $(BUILD)/parse_sweep $(BUILD)/cpool_stress $(BUILD)/codec_bench \
             $(BUILD)/output_hash
$(BUILD)/kernel_bench: bench/kernel_bench.c $(SERVER_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -Icore $(SERVER_INC) -o $@ $< $(SERVER_LIB) $(CORE_LIB) -lpthread -lm
$(BUILD)/check_kern: bench/check_kern.c $(CORE_LIB)
	$(CC) $(CFLAGS) -Icore -o $@ $< $(CORE_LIB) -lm
# A hash of layer / RMS norm outputs, to compare two revisions' bits.
$(BUILD)/output_hash: bench/output_hash.c $(CORE_LIB)
	$(CC) $(CFLAGS) -Icore -o $@ $< $(CORE_LIB) -lm
$(BUILD)/fmt_sweep: bench/fmt_sweep.c $(BUILD)/server/codec/fmt.o
	$(CC) $(CFLAGS) -Iserver/codec -o $@ $< $(BUILD)/server/codec/fmt.o -lpthread -lm
$(BUILD)/parse_sweep: bench/parse_sweep.c $(BUILD)/server/codec/fmt.o $(BUILD)/server/codec/fmt_parse.o
	$(CC) $(CFLAGS) -Iserver/codec -o $@ $< $(BUILD)/server/codec/fmt.o $(BUILD)/server/codec/fmt_parse.o \
	  -lpthread -lm
$(BUILD)/codec_bench: bench/codec_bench.c $(SERVER_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) $(SERVER_CFLAGS) -Icore $(SERVER_INC) -o $@ $< $(SERVER_LIB) $(CORE_LIB) \
	  $(SERVER_LIBS)
$(BUILD)/cpool_stress: bench/cpool_stress.c $(BUILD)/server/cpool.o
	$(CC) $(CFLAGS) -Iserver -o $@ $< $(BUILD)/server/cpool.o -lpthread

# The number printer against a previous revision of itself (bench/fmt_ab.c):
# FMT_AB_BASE's server/codec/fmt*.[ch] from git, its global symbols renamed
# prev_*, linked beside today's. `make fmt-ab` proves a printer change
# byte-identical (all 2^32 float32 patterns, 10^8 random doubles; minutes)
# and times the two; `build/fmt_ab count new` is for callgrind.
FMT_AB_BASE ?= 50b45a9
FMT_AB_DIR := $(BUILD)/fmt_ab_base/$(FMT_AB_BASE)
FMT_AB_FILES := fmt.c fmt.h fmt_internal.h
$(FMT_AB_DIR)/fmt_prev.o:
	@mkdir -p $(FMT_AB_DIR)
	for f in $(FMT_AB_FILES); do git show $(FMT_AB_BASE):server/codec/$$f > $(FMT_AB_DIR)/$$f || exit 1; done
	$(CC) $(CFLAGS) -I$(FMT_AB_DIR) -c $(FMT_AB_DIR)/fmt.c -o $(FMT_AB_DIR)/fmt_base.o
	nm --defined-only -g $(FMT_AB_DIR)/fmt_base.o | awk '{ print $$3, "prev_" $$3 }' > $(FMT_AB_DIR)/prev.syms
	objcopy --redefine-syms=$(FMT_AB_DIR)/prev.syms $(FMT_AB_DIR)/fmt_base.o $@
$(BUILD)/fmt_ab: bench/fmt_ab.c $(BUILD)/server/codec/fmt.o $(FMT_AB_DIR)/fmt_prev.o
	$(CC) $(CFLAGS) -Iserver/codec -o $@ $< $(BUILD)/server/codec/fmt.o $(FMT_AB_DIR)/fmt_prev.o \
	  -lpthread -lm
.PHONY: fmt-ab
fmt-ab: $(BUILD)/fmt_ab
	nice ./$(BUILD)/fmt_ab check 2
	./$(BUILD)/fmt_ab time

# Exactness sweeps too long for CI: every kernel table's half-precision
# conversions against the scalar reference, the compute pool under many
# callers, all 2^32 float32 patterns through fmt_float (round trip and
# shortest; tens of minutes), and back through fmt_parse_float, with random
# doubles and decimal texts, against strtof / strtod (also tens of minutes;
# ends with parsing throughput against the C library).
bench-check: $(BENCH_BIN)
	./$(BUILD)/check_kern
	./$(BUILD)/cpool_stress
	./$(BUILD)/fmt_sweep
	./$(BUILD)/parse_sweep

# Kernel GB/s beside the scale-copy memory ceiling and PyTorch (one table),
# the JSON codec's MB/s beside jansson and memcpy, then HTTP throughput,
# latency and RSS against nginx serving the same bytes.
bench: $(NORMD) $(BENCH_BIN)
	@scripts/install-deps.sh bench
	/usr/bin/python3 bench/kernel_table.py $(BUILD)/kernel_bench
	./$(BUILD)/codec_bench
	bench/http_bench.sh

# Regenerates tests/fixtures/torch_fixtures.json (needs Debian's python3-torch).
fixtures:
	@scripts/install-deps.sh fixtures
	/usr/bin/python3 tests/fixtures/gen_torch_fixtures.py > tests/fixtures/torch_fixtures.json

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# --- Deployment (docker/) -------------------------------------------------
.PHONY: docker-test cluster-test prometheus-test
DOCKER_IMAGE ?= localhost/normd:latest

# Checks docker/k8s and docker/compose.yaml without a cluster, builds the
# image with buildah (its Debian base made once with debootstrap, cached in
# /var/cache/normd-docker) and runs it without a Docker engine: port from
# NORMD_PORT, /healthz, a layer norm, /metrics, non-root, SIGTERM drain as
# PID 1. Each part ends with a "<name>: N passed, M failed" line.
docker-test:
	@scripts/install-deps.sh docker
	$(MAKE) --no-print-directory $(NORMD)
	/usr/bin/python3 tests/deploy/manifests_check.py
	scripts/docker-build.sh $(DOCKER_IMAGE)
	/usr/bin/python3 tests/deploy/docker_test.py $(DOCKER_IMAGE)

# Three replicas on loopback behind Debian's nginx with docker/nginx.conf;
# traffic while replicas are killed, drained and restarted; then
# examples/sync_batchnorm.py through nginx. Ends with "cluster: N passed, M failed".
cluster-test:
	@scripts/install-deps.sh cluster
	$(MAKE) --no-print-directory $(NORMD)
	/usr/bin/python3 tests/deploy/cluster_test.py

# docker/prometheus and docker/grafana against the real thing: promtool
# check config / check rules / test rules (alerts_test.yml), the dashboard
# JSON's structure, then two replicas scraped by Debian's prometheus running
# alerts.yml, traffic (2xx, 4xx, 503), and every dashboard expression must
# return data. Ends with "prometheus: N passed, M failed" (~20 s).
prometheus-test:
	@scripts/install-deps.sh prometheus
	$(MAKE) --no-print-directory $(NORMD)
	/usr/bin/python3 tests/deploy/prometheus_test.py

# ---- reliability: sanitizers, valgrind, fuzzing, stress --------------------
# Each sanitizer build lives in its own directory under build/ (so `make
# clean` removes it), made by a sub-make with BUILD pointing there.

SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
# Any report stops the process with a non-zero status; the daemon's reports
# also go to files (log_path) that the black-box run checks afterwards,
# since a daemon the suite kills with SIGKILL leaves no exit status.
ASAN_OPTS := halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
UBSAN_OPTS := halt_on_error=1:print_stacktrace=1
# Check's per-test timeouts guard against hangs; ASan makes every test 2-5x
# slower, so under it they stretch by 5 (a loaded 2-core machine timed out
# the heaviest layer-norm streaming test at the default).
SAN_ENV := ASAN_OPTIONS=$(ASAN_OPTS) UBSAN_OPTIONS=$(UBSAN_OPTS) CK_TIMEOUT_MULTIPLIER=5
ASAN_BUILD := build/asan

.PHONY: test-asan test-valgrind fuzz fuzz-smoke fuzz-build fuzz-bins stress stress-ci

# Everything (core, server, unit tests, daemon) with ASan + UBSan, then the
# unit tests and the black-box suite against the sanitized daemon (not
# tests/contract: one of its tests caps the daemon's address space, which
# ASan's shadow memory cannot live with). A report cut short is a daemon
# that exited while reporting: rerun with ASAN_OPTIONS=symbolize=0 added.
test-asan:
	@scripts/install-deps.sh asan
	$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) OPTIMIZATION=-O1 \
	  CFLAGS_EXTRA="$(SAN_FLAGS)" $(ASAN_BUILD)/normd $(ASAN_BUILD)/check_unit
	rm -rf $(ASAN_BUILD)/reports && mkdir -p $(ASAN_BUILD)/reports
	$(SAN_ENV) $(abspath $(ASAN_BUILD))/check_unit
	@rc=0; ASAN_OPTIONS=$(ASAN_OPTS):log_path=$(abspath $(ASAN_BUILD))/reports/asan \
	  UBSAN_OPTIONS=$(UBSAN_OPTS):log_path=$(abspath $(ASAN_BUILD))/reports/ubsan \
	  NORMD_BIN=$(ASAN_BUILD)/normd /usr/bin/python3 -m pytest -q tests/blackbox || rc=$$?; \
	if [ -n "$$(ls -A $(ASAN_BUILD)/reports)" ]; then \
	  cat $(ASAN_BUILD)/reports/* >&2; \
	  echo "test-asan: the daemon reported errors (above)" >&2; exit 1; fi; \
	exit $$rc

# The unit tests under valgrind in one process (CK_FORK=no): zero errors,
# zero definite leaks; tests/valgrind.supp says why each suppression exists.
test-valgrind: $(UNIT_BIN)
	@scripts/install-deps.sh valgrind
	CK_FORK=no valgrind --leak-check=full --errors-for-leak-kinds=definite \
	  --error-exitcode=1 --suppressions=tests/valgrind.supp --num-callers=30 \
	  ./$(UNIT_BIN)

# libFuzzer targets (clang): tests/fuzz/fuzz_<target>.c against the server
# and core built with coverage, ASan and UBSan in build/fuzz.
FUZZ_BUILD := build/fuzz
FUZZ_TARGETS := json npy framed query config request inflate
FUZZ_SECONDS ?= 300

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(SERVER_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(SERVER_CFLAGS) -Icore $(SERVER_INC) -o $@ \
	  $< $(SERVER_LIB) $(CORE_LIB) $(SERVER_LIBS)

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

# clang 14 knows neither GCC's "#pragma GCC target" nor the x86-64-v3/v4
# names of __builtin_cpu_supports that core/kern*.c use when __GNUC__ is
# defined; without it core builds its portable kernels only (kern_base),
# which is all the fuzzers need: they aim at the decoders.
$(FUZZ_BUILD)/core/%.o: CFLAGS += -U__GNUC__

fuzz-build:
	@scripts/install-deps.sh fuzz
	$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang OPTIMIZATION=-O1 \
	  CFLAGS_EXTRA="-fsanitize=fuzzer-no-link $(SAN_FLAGS)" fuzz-bins

# Replays tests/fuzz/regressions, then fuzzes each target for a bounded time
# and fails on any crash: 30 s each in CI, FUZZ_SECONDS (300) with `make fuzz`.
fuzz-smoke: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) 30 $(FUZZ_TARGETS)

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Load, faults and slow clients against the real daemon on loopback
# (tests/stress); stress-ci is the few-minute version CI runs.
stress: $(NORMD)
	@scripts/install-deps.sh stress
	/usr/bin/python3 tests/stress/stress.py --normd $(NORMD) --full

stress-ci: $(NORMD)
	@scripts/install-deps.sh stress
	/usr/bin/python3 tests/stress/stress.py --normd $(NORMD) --ci
