#!/usr/bin/env bash
# gpu-check.sh: check and measure syncgen's NCCL backend on a GPU machine in
# one go. Two halves, because the GPU machine has no Go toolchain:
#
#   scripts/gpu-check.sh build    on the build machine: compiles the test
#                                 binaries, the all-collectives program and
#                                 every examples/*.sync into .devbin/, and
#                                 packs them into .devbin.tar.xz
#   scripts/gpu-check.sh [run]    on the GPU machine, from the repository
#                                 root with .devbin.tar.xz (or .devbin/)
#                                 copied along; writes
#                                 its results to $OUT (default
#                                 /tmp/syncgen-gpu-check)
#   scripts/gpu-check.sh unpack   only unpacks .devbin.tar.xz, for the
#                                 benchmarks run with PREBUILT=.devbin/...
#
# The run: regenerates the PTX with nvcc (kernels/regen.sh) and uses it; runs
# the loader tests and the GPU tests (kernels bit-exact against the Go code,
# every collective, op and dtype, spin, overlap); runs the all-collectives
# program and every example under `mpirun -np 1` on the NCCL backend with
# checks on every step, with a trace; runs examples/mixed_cluster with its
# last rank at half speed and bench/hetero/run.sh; checks in the trace that a bucket's
# allreduce overlaps the simulated backward; and runs the benchmark: the C
# program calling ncclAllReduce directly next to the runtime, 4 B to 1 GiB,
# and the fill and cast bandwidth against cudaMemcpy's. docs/gpu.md says
# how to read the output.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
bin=.devbin

if [ "$mode" = build ]; then
	# Stripped, and syncgen itself kept out of .devbin: what travels to the
	# GPU machine is limited in size.
	set -e
	rm -rf $bin && mkdir -p $bin/examples $bin/cpu
	strip="-ldflags=-s -w"
	# The GPU backend's tests (the others run in CI).
	go test -c "$strip" -o $bin/gpu.test ./runtime/internal/backend/nccl
	go test -c "$strip" -o $bin/cuda.test ./runtime/cuda
	go test -c "$strip" -o $bin/dl.test ./runtime/internal/dl
	go test -c "$strip" -o $bin/nccl.test ./runtime/nccl
	go build "$strip" -o $bin/allops ./bench/gpu/allops
	# For the CPU comparison on the GPU machine's cores (bench/allreduce.sh
	# with PREBUILT=.devbin/cpu).
	go build "$strip" -o $bin/cpu/testprog ./runtime/internal/testprog
	go build "$strip" -o $bin/cpu/gompi ./bench/gompi
	go build "$strip" -o $bin/rtbench ./bench/gpu/rtbench
	sg=$(mktemp -d)/syncgen
	go build -o "$sg" ./cmd/syncgen
	for f in examples/*.sync; do
		n=$(basename "$f" .sync)
		"$sg" build -o "$bin/examples/$n" "$f" || echo "gpu-check build: $f failed to build" >&2
		strip "$bin/examples/$n"
	done
	# The training step's benchmark (bench/train/run.sh with PREBUILT).
	mkdir -p $bin/train
	for f in bench/train/*.sync; do
		n=$(basename "$f" .sync)
		"$sg" build -o "$bin/train/$n" "$f" || echo "gpu-check build: $f failed to build" >&2
		strip "$bin/train/$n"
	done
	# The prediction's benchmark (bench/predict/run.sh with PREBUILT): the
	# plans, the calibration's sweep programs and syncgen itself, which
	# fits the profile and needs no Go to do it.
	mkdir -p $bin/predict
	go build "$strip" -o $bin/predict/syncgen ./cmd/syncgen
	for f in bench/plans/resnet50_*.sync bench/plans/bert_large_*.sync; do
		n=$(basename "$f" .sync)
		case $n in *_ddp | *_cap4 | *_cap64 | *_cap128) ;; *) continue ;; esac
		"$sg" build -o "$bin/predict/$n" "$f" >/dev/null || echo "gpu-check build: $f failed to build" >&2
		strip "$bin/predict/$n"
	done
	for full in "" --full; do
		n=calibrate_sync
		[ -n "$full" ] && n=calibrate_full_sync
		"$sg" calibrate --plan bench/plans/resnet50_ddp.sync $full --emit "$bin/predict/$n.sync" >/dev/null
		"$sg" build -o "$bin/predict/$n" "$bin/predict/$n.sync" >/dev/null || echo "gpu-check build: $n failed to build" >&2
		strip "$bin/predict/$n"
	done
	# One archive of it all for the trip: the binaries share most of their
	# bytes, which xz's dictionary finds across files, so the archive
	# fits a limited transfer that .devbin/ itself does not. The run
	# unpacks it.
	rm -f $bin.tar.xz
	tar -cJf $bin.tar.xz $bin
	du -sh $bin $bin.tar.xz
	exit 0
fi

# .devbin.tar.xz, when it came along, is what the build made last: it
# replaces any .devbin/ here. The GPU machine may lack xz; Python's
# tarfile reads the archive too.
# `unpack` does only that, for the benchmarks that take PREBUILT=.devbin/...
if [ -f $bin.tar.xz ]; then
	echo "gpu-check: unpacking $bin.tar.xz" >&2
	rm -rf $bin
	if command -v xz >/dev/null 2>&1; then
		tar -xJf $bin.tar.xz
	else
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall()' $bin.tar.xz
	fi || {
		echo "gpu-check: cannot unpack $bin.tar.xz (it needs xz or python3): unpack it by hand, or carry $bin/ itself" >&2
		exit 2
	}
elif [ "$mode" = unpack ]; then
	echo "gpu-check: no $bin.tar.xz here to unpack" >&2
	exit 2
fi
[ "$mode" = unpack ] && exit 0

# Up front: the binaries and a GPU, or one message instead of a run that
# fails every step.
if [ ! -x $bin/gpu.test ]; then
	echo "gpu-check: no $bin/gpu.test here: run scripts/gpu-check.sh build (make gpu-build) on the build machine and copy $bin/ along" >&2
	exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "gpu-check: no nvidia-smi here: this machine has no NVIDIA driver; run on a GPU machine" >&2
	exit 2
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "gpu-check: nvidia-smi lists no GPU here: $(nvidia-smi -L 2>&1 | head -1)" >&2
	exit 2
fi

OUT=${OUT:-/tmp/syncgen-gpu-check}
mkdir -p "$OUT"
log=$OUT/log.txt
bench=$OUT/bench.txt
: >"$log"
: >"$bench"
status=0
say() { echo "== $*" | tee -a "$log"; }
fail() {
	echo "FAIL: $*" | tee -a "$log"
	status=1
}
run() { # run NAME CMD...: run a step, its output to the log, fail on error;
	# returns the command's status, so that `if run ...` means it succeeded
	local name=$1 rc=0
	shift
	say "$name: $*"
	"$@" >>"$log" 2>&1 || rc=$?
	[ "$rc" = 0 ] || fail "$name (exit $rc)"
	return "$rc"
}

. scripts/gpu-env.sh | tee -a "$log"
. scripts/gpu-env.sh >/dev/null
# kernels/regen.sh calls nvcc and ptxas: take them from CUDA_HOME when the
# PATH lacks them.
if ! command -v nvcc >/dev/null 2>&1 && [ -x "$CUDA_HOME/bin/nvcc" ]; then
	PATH=$CUDA_HOME/bin:$PATH
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun="mpirun -np 1 --bind-to none"
say "machine"
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
	nvcc --version | tail -1
	echo "NCCL: ${SYNCGEN_NCCL_LIB:-libnccl.so.2}"
} >>"$log" 2>&1

# 1. The PTX, compiled here. The binaries embed the committed one; if that
# is stale (kernels/syncgen.cu changed since), they load the fresh one and
# the run says to commit it. Without nvcc, or when the compilation fails,
# they keep the embedded one, and the run says it went unchecked.
rm -f "$OUT/syncgen.ptx"
if ! command -v nvcc >/dev/null 2>&1; then
	say "ptx: nvcc is missing here (not on PATH nor in CUDA_HOME=$CUDA_HOME/bin): the binaries use the committed runtime/cuda/syncgen.ptx, unchecked against kernels/syncgen.cu"
elif run ptx bash kernels/regen.sh "$OUT/syncgen.ptx" && { [ -s "$OUT/syncgen.ptx" ] || ! fail "ptx: kernels/regen.sh wrote no $OUT/syncgen.ptx"; }; then
	if cmp -s "$OUT/syncgen.ptx" runtime/cuda/syncgen.ptx; then
		say "ptx: the committed runtime/cuda/syncgen.ptx is up to date; the binaries use it"
	else
		say "ptx: runtime/cuda/syncgen.ptx is stale: using the fresh one; copy $OUT/syncgen.ptx there and commit it"
		export SYNCGEN_PTX=$OUT/syncgen.ptx
	fi
else
	say "ptx: regenerating failed (see above): the binaries use the committed runtime/cuda/syncgen.ptx, unchecked against kernels/syncgen.cu"
	rm -f "$OUT/syncgen.ptx"
fi

# 2. Loader error paths and the GPU tests.
run "dl tests" $bin/dl.test -test.v
run "cuda tests" $bin/cuda.test -test.v
run "nccl tests" $bin/nccl.test -test.v
run "GPU tests" $bin/gpu.test -test.v -test.timeout 10m

# 3. Every collective, op and dtype through runtime.Main, checked every step.
if [ -x $bin/allops ]; then
	run "all collectives" $mpirun $bin/allops --backend nccl --check 1 --trace "$OUT/trace-allops.json" --json "$OUT/allops.json"
fi

# 4. Every example, checked every step, with a trace.
for ex in $bin/examples/*; do
	[ -x "$ex" ] || continue
	n=$(basename "$ex")
	# Few steps: checking every element of GPT-2 XL's 5.8 GiB on the host
	# takes a while, and every step is checked.
	run "example $n" timeout 300 $mpirun "$ex" --backend nccl --check 1 --steps 3 --warmup 1 --trace "$OUT/trace-$n.json"
done

# 4b. Heterogeneous ranks on the GPUs there are (up to 4; one rank alone
# still runs the stretched spin kernels and the balancing): the last rank
# at half speed, dynamic balancing, checked every step; then the
# benchmark, unbalanced against static and dynamic balancing.
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
np=$((ngpu < 4 ? ngpu : 4))
[ "$np" -ge 1 ] || np=1
if [ -x $bin/examples/mixed_cluster ]; then
	run "hetero" mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE=0 $bin/examples/mixed_cluster --backend nccl --check 1 --steps 12 --warmup 1 \
		--speed $((np - 1))=0.5 --batch 256 --balance dynamic:3 --json "$OUT/hetero.json"
	# The result straight into $OUT: only this run's, none if it failed.
	rm -f "$OUT/hetero-bench.json"
	run "hetero bench" env NP=$np BACKEND=nccl PREBUILT=$bin/examples JSON="$OUT/hetero-bench.json" sh bench/hetero/run.sh
fi

# 4c. Out-of-place collectives (examples/out_of_place: ncclAllReduce and
# the others with distinct send and receive buffers) on every GPU there
# is (up to 4), every output and source checked every step.
if [ -x $bin/examples/out_of_place ]; then
	run "out of place" mpirun -np $np --bind-to none -x NCCL_NVLS_ENABLE=0 $bin/examples/out_of_place --backend nccl --check 1 --steps 5 --warmup 1 \
		--json "$OUT/out_of_place.json"
fi

# 5. Overlap: in the first example's trace (or the all-collectives one), a
# bucket's allreduce must start before the backward pass on another stream
# has ended.
tr=
for tr in "$OUT"/trace-resnet50.json "$OUT"/trace-*.json; do
	[ -f "$tr" ] || continue
	say "overlap in $(basename "$tr")"
	python3 bench/gpu/overlap.py "$tr" >>"$log" 2>&1 || fail "no overlap in $tr"
	break
done
# Keep one trace, the one checked above: the files that come back are few.
keep=$tr
for tr in "$OUT"/trace-*.json; do [ "$tr" = "$keep" ] || rm -f "$tr"; done

# 6. The benchmark: C calling NCCL directly, then the runtime, same sizes.
say "benchmark"
if [ -n "${NCCL_HOME:-}" ] && gcc -O2 -o "$OUT/nccl_allreduce" bench/gpu/nccl_allreduce.c \
	-I"$CUDA_HOME/include" -I"$NCCL_HOME/include" -L"$CUDA_HOME/lib64" -L"$NCCL_LIBDIR" \
	-l:libnccl.so.2 -lcudart >>"$log" 2>&1; then
	LD_LIBRARY_PATH="$NCCL_LIBDIR:$CUDA_HOME/lib64:${LD_LIBRARY_PATH:-}" "$OUT/nccl_allreduce" >>"$bench" 2>>"$log" || fail "C baseline"
	rm -f "$OUT/nccl_allreduce"
else
	fail "building the C baseline (NCCL_HOME=${NCCL_HOME:-unset})"
fi
SYNCGEN_GPU_BENCH=1 $bin/gpu.test -test.run 'GPUBench' -test.v >>"$bench" 2>>"$log" || fail "runtime benchmark"
# Through a whole program as generated code drives it: K allreduces a step.
echo "# syncgen program allreduce (bench/gpu/rtbench): step time p50 / K" >>"$bench"
for bytes in 4 4096 65536 1048576 16777216 268435456 1073741824; do
	k=200
	[ $bytes -gt 1048576 ] && k=20
	line=$(SYNCGEN_BENCH_BYTES=$bytes SYNCGEN_BENCH_K=$k $mpirun $bin/rtbench --backend nccl --check off --steps 30 --warmup 3 2>>"$log" | grep '^# step time')
	echo "$line" >>"$log"
	python3 - "$bytes" "$k" "$line" >>"$bench" <<'PY' 2>>"$log" || fail "rtbench $bytes: no result"
import re, sys
bytes, k, line = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
m = re.search(r"p50 ([0-9.]+) (us|ms|s)\b", line)
if not m:
    sys.exit("rtbench %d B: no result (no '# step time ... p50' line; see the log)" % bytes)
us = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
print("program %-14d %6d %12.2f" % (bytes, k, us / k))
PY
done
python3 bench/gpu/compare.py "$bench" >>"$bench" 2>>"$log" || fail "comparing the benchmark"
cat "$bench" >>"$log"

say "done: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
