# Outpost workspace. On a fresh machine `make demo` and `make test` are all a newcomer needs:
# both run `setup` first, which installs the system libraries that are missing (and python3,
# which the HTTP transport tests use as a scripted local server, when the machine has none, with
# PyYAML and openapi-spec-validator, which the contract tests read the API document with).

SWIFT ?= swift
APT_PACKAGES := libsqlite3-dev libxml2-dev zlib1g-dev libdeflate-dev
# The peers `make bench` measures against (the sqlite3 CLI, xmllint).
BENCH_APT_PACKAGES := sqlite3 libxml2-utils
# The real parsers the contract tests read schemas/sync-api.yaml with (PyYAML, openapi-spec-validator),
# and /metrics with (the Prometheus client's text-format parser).
PYTHON_PACKAGES := pyyaml openapi-spec-validator prometheus-client
# The server's PostgreSQL backend is tested (and benchmarked) on a throwaway cluster of Debian's server.
POSTGRES_APT_PACKAGES := postgresql
# The example app's tests check its bundle with xmllint and make a foreign file with sqlite3.
EXAMPLE_APT_PACKAGES := sqlite3 libxml2-utils
# The TLS test makes a throwaway certificate with openssl and calls the server with curl.
TLS_APT_PACKAGES := openssl curl ca-certificates
# `make contract` runs schemathesis (PyPI) from a virtual environment it makes under .build.
CONTRACT_APT_PACKAGES := python3-venv
# Apps built on Outpost as a team builds them: each its own package, its tests compiled in the one build
# graph and run in a process of their own, since a process runs on one app's schema.
EXAMPLE_TESTS := ContractorJobsTests
# Test cases one test process runs at once. Swift Testing starts every test of a process together by
# default: with some 750 tests in flight on two cores, a test's timeouts measured the whole suite, not
# its own code (a request waited minutes for a thread and timed out). Beside a CPU-bound process, not
# one test had finished after 7 minutes (all finish near the end, 1315 s); eight at a time finished
# their first 130 in 4 minutes and the run in 1181 s. Eight keep both cores busy while tests wait on
# servers and children. The setting is marked experimental; a toolchain without it runs every test at
# once, as before.
TEST_WIDTH ?= 8
TEST_ENV := SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH)
PACKAGES := $(notdir $(wildcard Packages/*))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt-install build test contract contract-run demo demo-bundle bench reliability fuzz packages clean

## setup: install the Debian packages Outpost builds against, only those that are missing
setup:
	@command -v $(SWIFT) >/dev/null || { echo "error: '$(SWIFT)' not found; install Swift 6.2 or later" >&2; exit 1; }
	@$(MAKE) --no-print-directory apt-install PACKAGES_WANTED="$(APT_PACKAGES)"
	@command -v python3 >/dev/null || $(MAKE) --no-print-directory apt-install PACKAGES_WANTED=python3
	@python3 -c 'import yaml, openapi_spec_validator, prometheus_client' 2>/dev/null || { echo "setup: installing $(PYTHON_PACKAGES) from PyPI"; \
	  python3 -m pip install -q $(PYTHON_PACKAGES) 2>/dev/null || python3 -m pip install -q --break-system-packages $(PYTHON_PACKAGES); }

# apt-install: install PACKAGES_WANTED with apt-get, only those dpkg does not know yet
apt-install:
	@if command -v dpkg >/dev/null 2>&1; then \
	  missing=""; \
	  for p in $(PACKAGES_WANTED); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "setup: installing$$missing"; \
	    $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  fi; \
	else \
	  echo "setup: no dpkg here; make sure SQLite 3 and libxml2 development files are installed"; \
	fi

## build: compile every package and the outpost tool in one build graph
build: setup
	$(SWIFT) build

## test: every package's tests and the workspace tests, in one build graph, with a throwaway PostgreSQL (the server tests in a process of their own beside the rest: scripts/test-in-two.sh); then each example app's tests
test: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES_WANTED="$(POSTGRES_APT_PACKAGES) $(EXAMPLE_APT_PACKAGES) $(TLS_APT_PACKAGES) $(CONTRACT_APT_PACKAGES)"
	@for p in $(addprefix Packages/,$(PACKAGES)) $(wildcard Examples/*); do \
	  $(SWIFT) package --package-path $$p dump-package >/dev/null || { echo "$$p: manifest does not load" >&2; exit 1; }; \
	done
	$(TEST_ENV) scripts/with-test-postgres.sh scripts/test-in-two.sh $(SWIFT) $(foreach t,$(EXAMPLE_TESTS),--skip $(t))
	@for t in $(EXAMPLE_TESTS); do \
	  echo "== $$t (an example app, in its own process)"; \
	  $(TEST_ENV) $(SWIFT) test --skip-build --filter "$$t" || exit 1; \
	done
	@$(MAKE) --no-print-directory contract-run

## contract: schemathesis against a seeded server on each backend (SQLite, PostgreSQL), a fixed seed, every check: zero failures
contract: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES_WANTED="$(POSTGRES_APT_PACKAGES) $(CONTRACT_APT_PACKAGES)"
	@$(MAKE) --no-print-directory contract-run

contract-run:
	$(SWIFT) build --product outpost
	scripts/with-test-postgres.sh scripts/contract.sh "$$($(SWIFT) build --show-bin-path)"

## demo: the main job: a server on 127.0.0.1 and two devices through a field day, every claim checked
demo: setup
	$(SWIFT) build --product outpost-demo
	"$$($(SWIFT) build --show-bin-path)/outpost-demo"

## demo-bundle: pre-sync from a bundle file with the outpost CLI: validate, import twice, inspect
demo-bundle: setup
	$(SWIFT) build --product outpost
	@set -e; bin="$$($(SWIFT) build --show-bin-path)/outpost"; dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; \
	echo; echo "== A new device database, migrated to the latest schema"; \
	"$$bin" migrate --db "$$dir/device.sqlite"; \
	echo; echo "== Pre-sync: the night before, validate and import the project bundle"; \
	"$$bin" bundle validate schemas/examples/project-bundle.xml; \
	"$$bin" import schemas/examples/project-bundle.xml --db "$$dir/device.sqlite"; \
	echo; echo "== Importing it again (the JSON encoding of the same bundle) changes nothing"; \
	"$$bin" import schemas/examples/project-bundle.json --db "$$dir/device.sqlite"; \
	echo; echo "== What the device now holds"; \
	"$$bin" info --db "$$dir/device.sqlite"; \
	"$$bin" status --db "$$dir/device.sqlite"; \
	"$$bin" audit verify --db "$$dir/device.sqlite"

## bench: performance figures, each against a peer measured in the same run (SUITE=name for one); writes bench-results.json, and BENCHMARKS.md after a full run
bench: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES_WANTED="$(BENCH_APT_PACKAGES) $(POSTGRES_APT_PACKAGES)"
	$(SWIFT) build -c release --product outpost-bench
	$(SWIFT) build -c release --product outpost
	OUTPOST_TEST_POSTGRES_DURABLE=1 scripts/with-test-postgres.sh $(SWIFT) run -c release outpost-bench $(SUITE) \
	  --json bench-results.json --markdown BENCHMARKS.md

## reliability: faults, kills and convergence at full scale (a throwaway PostgreSQL for the multi-instance scenario); a table of lost/duplicated/diverged (all must be 0), also in reliability-results.json
reliability: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES_WANTED="$(POSTGRES_APT_PACKAGES)"
	$(SWIFT) build --product outpost
	$(SWIFT) build --product outpost-reliability
	scripts/with-test-postgres.sh "$$($(SWIFT) build --show-bin-path)/outpost-reliability" --json reliability-results.json $(ARGS)

## fuzz: the bundle importer's libFuzzer target for FUZZ_SECONDS (60) over schemas/examples and Fuzz/Corpus;
## a crashing input is written to Fuzz/Corpus/regressions, which `make test` replays
FUZZ_SECONDS ?= 60
fuzz: setup
	$(SWIFT) build --package-path Fuzz --scratch-path .build-fuzz -c debug \
	  -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library --product BundleImportFuzzer
	@mkdir -p .build-fuzz/corpus
	ASAN_OPTIONS=detect_leaks=0 OUTPOST_FUZZ_EXAMPLE="$(CURDIR)/schemas/examples/project-bundle.xml" \
	  "$$($(SWIFT) build --package-path Fuzz --scratch-path .build-fuzz -c debug --show-bin-path)/BundleImportFuzzer" \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=30 -rss_limit_mb=4096 -detect_leaks=0 -print_final_stats=1 \
	  -artifact_prefix=Fuzz/Corpus/regressions/ \
	  .build-fuzz/corpus schemas/examples Fuzz/Corpus/attacks Fuzz/Corpus/regressions

## packages: build and test each package on its own, as a team depending on one package would
packages: setup
	@for p in $(addprefix Packages/,$(PACKAGES)) $(wildcard Examples/*); do \
	  echo "== $$p"; \
	  $(TEST_ENV) $(SWIFT) test --package-path $$p --scratch-path .build-packages/$$(basename $$p) || exit 1; \
	done

## clean: remove every build folder
clean:
	rm -rf .build .build-* Packages/*/.build Examples/*/.build
