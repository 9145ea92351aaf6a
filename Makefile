# syncgen's Makefile. On a fresh Debian/Ubuntu machine with Go:
#   make run    the main job: build examples/resnet50.sync and run it under mpirun with 4 ranks
#   make test   the test suite (what CI runs)
# Both install Open MPI first when it is missing (scripts/setup.sh).

GO      ?= go
NP      ?= 4
EXAMPLE ?= examples/resnet50.sync
BIN     := bin
SYNCGEN := $(BIN)/syncgen
# Extra flags for the generated program, e.g. make run ARGS="--steps 50 --trace trace.json"
ARGS    ?=
# How long each fuzz target runs in `make test` (CI runs them briefly).
FUZZTIME ?= 10s

.PHONY: all setup syncgen run test fuzz golden bench bench-gpu fmt vet clean

all: syncgen

setup:
	@sh scripts/setup.sh

syncgen:
	$(GO) build -o $(SYNCGEN) ./cmd/syncgen

# The main job. The program picks NCCL when every rank has a GPU of its own
# and libnccl loads, and MPI's collectives on the CPU otherwise.
run: setup syncgen
	$(SYNCGEN) run -np $(NP) $(EXAMPLE) -- $(ARGS)

test: setup vet
	$(GO) test -count=1 -timeout 20m ./...
	$(MAKE) fuzz

# Each fuzz target of the front end, briefly; longer runs: make fuzz FUZZTIME=5m
fuzz:
	@for t in FuzzParse FuzzCheck FuzzFormat; do \
		echo "fuzz $$t ($(FUZZTIME))"; \
		$(GO) test ./dsl -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

# Regenerate the golden files of code generation; review the diff like code.
golden:
	$(GO) test ./codegen -run TestGolden -update

bench: setup syncgen
	sh bench/run.sh

# The GPU half of the benchmarks; run it on a machine with NVIDIA GPUs.
bench-gpu:
	sh bench/gpu/run.sh

fmt:
	gofmt -w $$(git ls-files '*.go')
	@for f in examples/*.sync; do $(GO) run ./cmd/syncgen fmt -w $$f; done

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

clean:
	rm -rf $(BIN) *_sync
