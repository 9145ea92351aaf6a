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
# How long each fuzz target runs in `make test` (CI runs them briefly): a
# count of inputs, not a duration. With a duration, Go before 1.27 can fail
# a target at the deadline with "context deadline exceeded" and no failing
# input (a race in its fuzzing coordinator, go.dev/issue/75804).
FUZZTIME ?= 60000x
# How hard a new input is minimised: Go's default (60s each) stalled the
# short runs for most of their time.
FUZZMINIMIZETIME ?= 50x

.PHONY: all setup syncgen run test fuzz golden bench bench-gpu gpu-build gpu-check ptx fmt vet clean

all: syncgen

setup:
	@sh scripts/setup.sh

syncgen:
	$(GO) build -o $(SYNCGEN) ./cmd/syncgen

# The main job. The program picks NCCL when every rank has a GPU of its own
# and libnccl loads, and MPI's collectives on the CPU otherwise.
run: setup syncgen
	$(SYNCGEN) run -np $(NP) -o $(BIN)/ $(EXAMPLE) -- $(ARGS)

test: setup vet
	$(GO) test -count=1 -timeout 20m ./...
	$(MAKE) fuzz

# Each fuzz target of the readers of user files (the front end, and
# syncgen import's header and index readers, the cost model's profile reader, syncgen run's hostfile
# reader, syncgen flightrec's reader, the checkpoints' readers), briefly; longer runs: make fuzz FUZZTIME=2000000x
fuzz:
	@for t in dsl:FuzzParse dsl:FuzzCheck dsl:FuzzFormat importer:FuzzHeader importer:FuzzIndex runtime/costmodel:FuzzParseProfile cmd/syncgen:FuzzHostfile cmd/syncgen:FuzzFlightRecords cmd/syncgen:FuzzSplitWords runtime/internal/ckpt:FuzzShard runtime/internal/ckpt:FuzzMetadata runtime/internal/ckpt:FuzzCommitted; do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$name in ./$$pkg ($(FUZZTIME))"; \
		$(GO) test ./$$pkg -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZETIME) || exit 1; \
	done

# Regenerate the golden files of code generation; review the diff like code.
golden:
	$(GO) test ./codegen -run TestGolden -update

bench: setup syncgen
	sh bench/run.sh

# GPU targets (docs/gpu.md). The GPU machine needs no Go toolchain: build
# its binaries here into .devbin/ and .devbin.tar.xz (ignored by git), then
# run them there.
gpu-build:
	scripts/gpu-check.sh build

# On the GPU machine, from the repository root with .devbin.tar.xz (or
# .devbin/): the GPU tests,
# every collective x op x dtype and every example checked on every step, the
# overlap in a trace, and the benchmark (C calling NCCL vs the runtime).
gpu-check bench-gpu:
	scripts/gpu-check.sh run

# On a machine with nvcc: regenerate the embedded PTX from kernels/syncgen.cu.
ptx:
	kernels/regen.sh runtime/cuda/syncgen.ptx

fmt:
	gofmt -w $$(git ls-files '*.go')
	@for f in examples/*.sync; do $(GO) run ./cmd/syncgen fmt -w $$f; done

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) vet -tags syncgen_testhooks ./runtime/...
	sh scripts/check-imports.sh

clean:
	rm -rf $(BIN) *_sync
