# normd -- the single entry point: make, make run, make test, make bench.
# OPTIMIZATION and CFLAGS may be overridden: make OPTIMIZATION=-O0 CFLAGS_EXTRA=-g

CC ?= gcc
OPTIMIZATION ?= -O2
WARN := -Wall -Wextra -Werror
CFLAGS ?= -std=c11 $(OPTIMIZATION) $(WARN) -g -D_GNU_SOURCE $(CFLAGS_EXTRA)
PKG_CONFIG ?= pkg-config
BUILD := build

CORE_SRC := $(wildcard core/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libnormcore.a

UNIT_SRC := $(wildcard tests/unit/check_*.c)
UNIT_BIN := $(BUILD)/check_unit
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null) $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)

.PHONY: all test unit-test clean deps fixtures

all: $(CORE_LIB) $(UNIT_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icore -MMD -MP -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(UNIT_BIN): $(UNIT_SRC:%.c=$(BUILD)/%.o) $(CORE_LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(CHECK_LIBS) -lm

unit-test: $(UNIT_BIN)
	./$(UNIT_BIN)

test: unit-test

# Regenerates tests/fixtures/torch_fixtures.json (needs Debian's python3-torch).
fixtures:
	/usr/bin/python3 tests/fixtures/gen_torch_fixtures.py > tests/fixtures/torch_fixtures.json

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
