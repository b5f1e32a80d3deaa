# ferry — common tasks. CI runs `bash .ci/run`, which installs the GridFTP
# peers and runs `make test` with FERRY_INTEROP=required.

GO ?= go

.PHONY: build test test-fast demo bench fuzz

build:
	$(GO) build -o bin/ferry ./cmd/ferry

# Every test: with the interop tag, also those that need the peers
# (internal/interoptest).
test:
	$(GO) vet ./...
	$(GO) vet -tags interop ./...
	$(GO) test -count=1 -timeout 30m -tags interop ./...

# The tests that need no peers, less the few with 5,000 to 30,000 files
# (-short): a few minutes, no peers needed.
test-fast:
	$(GO) vet ./...
	$(GO) test -count=1 -short ./...

demo: build
	bash scripts/demo.sh

# Every fuzz target for FUZZTIME each (default 5m), nightly style; see
# scripts/fuzz.sh for FUZZMINIMIZE, FUZZPARALLEL and FUZZ.
fuzz:
	bash scripts/fuzz.sh

bench: build
	@if [ -f bench/gridftp.sh ]; then \
		bash bench/gridftp.sh; \
	else \
		echo "bench: no bench/gridftp.sh yet, nothing to run"; \
	fi
