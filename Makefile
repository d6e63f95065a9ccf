# Thin wrapper around CMake (the way Neovim does it). Every target first runs the one
# dependency script, which is a quick no-op when everything is installed.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_ARGS ?=
ARGS       ?=

.PHONY: all deps configure build test test-c test-lua lint bench run quickstart install cdef cdef-ledger soak soak-wal soak-audit fuzz clean

all: build

deps:
	@sh tools/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Every test: C tests, the same C tests under ASan+UBSan, busted specs under LuaJIT,
# a short fuzz run. Long soaks and fuzz runs are their own targets.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-c: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L c $(CTEST_ARGS)

test-lua: build
	cd $(BUILD) && ctest --output-on-failure -L lua $(CTEST_ARGS)

# luacheck, shellcheck, clang-format, cppcheck, function length, the C layers (cmake/lint.cmake);
# also part of `make test`.
lint: build
	cd $(BUILD) && ctest --output-on-failure -L lint $(CTEST_ARGS)

bench: build
	cmake --build $(BUILD) --target bench

# The nginx gateway's benchmarks (tests/bench/README.md): real nginx under wrk, minutes.
.PHONY: bench-nginx
bench-nginx: build
	cmake --build $(BUILD) --target bench-nginx

# The main job: the whole product on its embedded defaults (examples/daemon.lua: meter ->
# ledger -> wallet -> audit trail under var/; ARGS passes options, e.g.
# `make run ARGS="--demo 1000 --window 60"`, `ARGS=--meter-only`). Ctrl-C drains and stops
# it. The build is quiet (tools/quiet-build.sh): compiler lines only when something compiles.
run: configure
	@sh tools/quiet-build.sh $(BUILD) $(JOBS)
	@$(BUILD)/ron-accounting run examples/daemon.lua $(ARGS)

# The one-page tour on simulated time: record, seal, b3sum, chains, ACK.
quickstart: build
	$(BUILD)/ron-accounting run examples/quickstart.lua

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package (CPack; docs/ops/package.md): $(BUILD)/package/ron-accounting_*.deb
.PHONY: package
package: build
	cd $(BUILD) && cpack -G DEB

cdef: deps
	sh tools/gen-cdef.sh > lua/ron/accounting/binding/cdef.lua
	sh tools/gen-cdef.sh audit > lua/ron/audit/cdef.lua
	sh tools/gen-cdef.sh ingest-dto > lua/ron/accounting/binding/ingest_cdef.lua
	sh tools/gen-cdef.sh wallet-dto > lua/ron/wallet/dto_cdef.lua

# The ledger's binding from include/ron/ledger.h (docs/LEDGER.md).
cdef-ledger: deps
	sh tools/gen-cdef.sh ledger > lua/ron/ledger/cdef.lua

# Long runs (docs/ops/make-targets.md): `soak` = the conservation stress and G-7's 1000 kill -9
# iterations; `soak-wal` = the latter alone.
soak: build
	cmake --build $(BUILD) --target soak

soak-wal: build
	cmake --build $(BUILD) --target soak-wal

# The ledger's long runs (docs/LEDGER.md "Testing the commit path"): `sim-ledger` = the
# deterministic simulator over 400 seeds; `soak-ledger` = 500 kill -9 of a committing process
# against a real PostgreSQL, each followed by recover() and the invariants.
.PHONY: sim-ledger soak-ledger
sim-ledger: build
	cmake --build $(BUILD) --target sim-ledger

soak-ledger: build
	cmake --build $(BUILD) --target soak-ledger

# The fleet (docs/WALLET.md §6): two wallet daemons and the rater on one real PostgreSQL,
# three kill -9s of a node kept dead 40 s, more keys than `make test`'s host-wallet-fleet.
.PHONY: soak-fleet
soak-fleet: build
	cmake --build $(BUILD) --target soak-fleet

# The audit log's kill -9 loop with 1000 kills (make test runs 20).
soak-audit: build
	cmake --build $(BUILD) --target soak-audit

fuzz: build
	cmake --build $(BUILD) --target fuzz-long

clean:
	rm -rf $(BUILD)
