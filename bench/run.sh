#!/bin/sh
# bench/run.sh: syncgen's CPU benchmarks against the tools users know (`make bench`).
#
#   1. one allreduce, 4 KiB .. 256 MiB, through a generated program vs a plain C program calling
#      MPI_Allreduce (bench/allreduce.sh, bench/mpi_allreduce.c): busbw and ratio (target >= 0.95)
#   2. resnet50 and bert_large gradient sync with DDP's plan through syncgen vs PyTorch
#      DistributedDataParallel (gloo) on the same shapes, bucket_cap_mb=25 (bench/ddp/)
#   3. bucketing plans against each other: per tensor, DDP's, one bucket, 4/25/64/128 MiB caps
#      (bench/plans/)
#   4. the compiler: syncgen gen and build (cold, cached), resnet50 and 10,000 tensors
#      (bench/compiler/)
# Each comparison runs at 2 and 4 ranks, the contenders alternating (A B A B ...) for ROUNDS
# rounds; medians and ratios are printed as Markdown tables and written to bench/results/*.json
# (machine, versions, commit, load and the exact commands included; a comparison that fails
# leaves its file as it was). FULL=1's comparison 2 goes to ddp_full.json. docs/performance.md explains them.
#
#   sh bench/run.sh                     # the default set (about 15 min on a 2-core machine)
#   QUICK=1 sh bench/run.sh             # 2 ranks, 1 round, few steps: checks the set-up (~2 min)
#   FULL=1 sh bench/run.sh              # also bert_large against DDP, every allreduce size and a
#                                       # first build with an empty Go cache (about 35 min)
#   ONLY="2 3" ROUNDS=5 sh bench/run.sh # some comparisons, more rounds
#   NPS="2" MODELS="resnet50" PLAN_MODELS="resnet50,bert_large" sh bench/run.sh
#
# On a machine without Go (the GPU machine's CPUs): build where Go is, copy the folder along,
# and run comparisons 1 and 2 from it (PREBUILT needs neither Go nor bin/syncgen):
#   go build -o DIR/testprog ./runtime/internal/testprog && go build -o DIR/gompi ./bench/gompi
#   python3 bench/ddp/compare.py --build-only --models resnet50,bert_large --out DIR
#   PREBUILT=DIR ONLY="1 2" NPS="2 4 8" MODELS=resnet50,bert_large sh bench/run.sh
#
# Knobs: ONLY (default "1 2 3 4"), NPS ("2 4"), ROUNDS (3), MODELS (comparison 2: "resnet50";
# FULL=1: "resnet50,bert_large"), OVERLAP_MODELS (the models of comparison 2 that also run the
# overlapped regimes: "resnet50"; bert_large's simulated backward takes seconds a step on the CPU
# backend, see docs/performance.md), PLAN_MODELS (comparison 3: "resnet50"), SIZES (comparison 1,
# passed to bench/allreduce.sh: "4K 64K 1M 16M 256M"; FULL=1: 4K to 256M by 4x plus 32M and
# 128M), MPIRUN_ARGS (default "--oversubscribe --bind-to none", plus --allow-run-as-root as root),
# TORCH_PYTHON (/usr/bin/python3), OUT (scratch, bench/out).
#
# It installs nothing. Open MPI and Go are needed (`make setup` installs Open MPI); comparison 2
# needs Debian's python3-torch for /usr/bin/python3 and is skipped, saying how to install it,
# when that is missing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ONLY=${ONLY:-"1 2 3 4"}
QUICK=${QUICK:-0}
FULL=${FULL:-0}
if [ "$QUICK" = 1 ]; then
	NPS=${NPS:-"2"}
	ROUNDS=${ROUNDS:-1}
	SIZES=${SIZES:-"4K 1M 64M"}
	MODELS=${MODELS:-"resnet50"}
	steps="--steps 5 --warmup 1"
	compiler_runs="--runs 2 --build-runs 1"
elif [ "$FULL" = 1 ]; then
	NPS=${NPS:-"2 4"}
	ROUNDS=${ROUNDS:-3}
	SIZES=${SIZES:-"4K 16K 64K 256K 1M 4M 16M 32M 64M 128M 256M"}
	MODELS=${MODELS:-"resnet50,bert_large"}
	steps=""
	compiler_runs="--runs 5 --build-runs 3 --cold-gocache"
else
	NPS=${NPS:-"2 4"}
	ROUNDS=${ROUNDS:-3}
	SIZES=${SIZES:-"4K 64K 1M 16M 256M"}
	MODELS=${MODELS:-"resnet50"}
	steps=""
	compiler_runs="--runs 5 --build-runs 3"
fi
PLAN_MODELS=${PLAN_MODELS:-"resnet50"}
OVERLAP_MODELS=${OVERLAP_MODELS:-"resnet50"}
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
# FULL=1's comparison 2 (with bert_large) goes to a file of its own, so that it does not replace
# the default run's figures.
ddp_results=ddp.json
if [ "$FULL" = 1 ]; then ddp_results=ddp_full.json; fi
OUT=${OUT:-$root/bench/out}
export OUT TORCH_PYTHON
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the source tree
nps_csv=$(echo "$NPS" | tr ' ' ',')

PREBUILT=${PREBUILT:-}
export PREBUILT
needs="go mpirun mpicc pkg-config"
if [ -n "$PREBUILT" ]; then
	needs="mpirun"
	case " $ONLY " in *" 3 "* | *" 4 "*)
		echo "bench: PREBUILT runs comparisons 1 and 2 only (3 and 4 build programs): set ONLY=\"1 2\"" >&2
		exit 2
		;;
	esac
fi
missing=""
for c in $needs; do
	command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
if [ -n "$missing" ]; then
	echo "bench: missing:$missing. Open MPI: \`make setup\` (or, as root: apt-get install -y openmpi-bin libopenmpi-dev pkg-config); Go: https://go.dev/dl" >&2
	exit 1
fi
# Any python3 drives the comparisons (standard library only); the DDP contender needs torch.
if command -v python3 >/dev/null 2>&1; then PY=python3; elif [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else
	echo "bench: python3 is missing (as root: apt-get install -y python3)" >&2
	exit 1
fi
for c in $ONLY; do
	case $c in
	1 | 2 | 3 | 4) ;;
	*)
		echo "bench: unknown comparison $c (ONLY takes 1 2 3 4)" >&2
		exit 2
		;;
	esac
done
mkdir -p "$OUT" bench/results
[ -n "$PREBUILT" ] || go build -o bin/syncgen ./cmd/syncgen

started=$(date +%s)
failed=""
echo "# syncgen CPU benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
echo "# machine: $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory"
echo "# $(mpirun --version 2>/dev/null | head -1); $(go version 2>/dev/null || echo "programs from PREBUILT=$PREBUILT")"
if "$TORCH_PYTHON" -c 'import torch' >/dev/null 2>&1; then
	echo "# torch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($TORCH_PYTHON)"
else
	echo "# torch: not installed for $TORCH_PYTHON"
fi
echo "# load average at start:$(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/ /')"
echo "# ranks: $NPS; rounds: $ROUNDS; comparisons: $ONLY"

for c in $ONLY; do
	case $c in
	1)
		echo
		echo "## 1. one allreduce: generated program vs plain MPI_Allreduce ($(date -u +%H:%M:%S), load $(cut -d" " -f1 /proc/loadavg))"
		if [ -f bench/allreduce.sh ]; then
			# when it started and the load then, for the results file
			start_date=$(date -u "+%Y-%m-%d %H:%M UTC")
			start_load=$(cut -d" " -f1-3 /proc/loadavg)
			(NPS="$NPS" SIZES="$SIZES" ROUNDS="$ROUNDS" OUT="$OUT" sh bench/allreduce.sh ||
				echo "# bench/allreduce.sh FAILED") | tee "$OUT/allreduce.txt"
			if grep -q "^# bench/allreduce.sh FAILED" "$OUT/allreduce.txt"; then
				failed="$failed 1"
				echo "# bench/results/allreduce.json left as it was"
			else
				# its table ("ranks bytes mpi runtime ratio", with the comment lines under
				# each row) as bench/results/allreduce.json
				"$PY" - "$OUT/allreduce.txt" "$NPS" "$SIZES" "$ROUNDS" "$start_date" "$start_load" "${MPIRUN_ARGS:-}" <<'EOF'
import json, os, sys
sys.path.insert(0, os.path.join("bench", "ddp"))
import benchlib as bl
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if not line.startswith("#") and len(f) == 5:
        try:
            rows.append({"ranks": int(f[0]), "bytes": int(f[1]), "mpi_busbw_gbs": float(f[2]),
                         "syncgen_busbw_gbs": float(f[3]), "ratio": float(f[4])})
        except ValueError:
            pass
        continue
    if not rows or not line.startswith("#"):
        continue
    # the comment lines under a row (bench/allreduce.sh says what each is)
    r = rows[-1]
    try:
        if "(best of" in line:
            r["mpi_best_gbs"], r["syncgen_best_gbs"], r["best_ratio"] = float(f[1]), float(f[2]), float(f[3])
        elif "(from median call times)" in line:
            r["mpi_median_busbw_gbs"], r["syncgen_median_busbw_gbs"], r["median_ratio"] = float(f[1]), float(f[2]), float(f[3])
        elif "(median of the rounds' own ratios" in line:
            r["per_round_ratio"] = float(f[1])
        elif "(plain Go calling MPI_Allreduce" in line:
            r["plain_go_busbw_gbs"], r["syncgen_over_plain_go"] = float(f[1]), float(f[3])
        elif "(C with the runtime's MPI settings" in line:
            r["mpi_runtime_settings_busbw_gbs"], r["syncgen_over_mpi_runtime_settings"] = float(f[1]), float(f[3])
        elif "(C with glibc's mmap and trim thresholds raised" in line:
            r["mpi_mmap_threshold_busbw_gbs"], r["syncgen_over_mpi_mmap_threshold"] = float(f[1]), float(f[3])
    except (ValueError, IndexError):
        pass
machine = bl.machine()
machine["date"], machine["load_average_at_start"] = sys.argv[5], sys.argv[6].split()
cmd = 'NPS="%s" SIZES="%s" ROUNDS=%s sh bench/allreduce.sh' % (sys.argv[2], sys.argv[3], sys.argv[4])
if sys.argv[7]:
    cmd = 'MPIRUN_ARGS="%s" %s' % (sys.argv[7], cmd)
rec = {"comparison": "one allreduce: syncgen runtime vs plain MPI_Allreduce", "machine": machine,
       "rounds": int(sys.argv[4]), "commands": {"allreduce": cmd},
       "results": rows, "load_average_at_end": bl.loadavg()}
print("# results: %s" % os.path.relpath(bl.write_results("allreduce.json", rec), bl.ROOT))
EOF
			fi
		else
			echo "# comparison 1 SKIPPED: bench/allreduce.sh is not there (it belongs to the runtime's benchmarks)"
		fi
		;;
	2)
		echo
		echo "## 2. DDP's plan: syncgen vs PyTorch DistributedDataParallel (gloo) ($(date -u +%H:%M:%S), load $(cut -d" " -f1 /proc/loadavg))"
		if "$TORCH_PYTHON" -c 'import torch.distributed' >/dev/null 2>&1; then
			# shellcheck disable=SC2086
			"$PY" bench/ddp/compare.py --models "$MODELS" --overlap-models "$OVERLAP_MODELS" \
				--nps "$nps_csv" --rounds "$ROUNDS" --results "$ddp_results" $steps || failed="$failed 2"
		else
			echo "# comparison 2 SKIPPED: PyTorch is not installed for $TORCH_PYTHON."
			echo "# Install Debian's package (as root), then run again:"
			echo "#     apt-get install -y python3-torch"
		fi
		;;
	3)
		echo
		echo "## 3. bucketing plans against each other ($(date -u +%H:%M:%S), load $(cut -d" " -f1 /proc/loadavg))"
		# shellcheck disable=SC2086
		"$PY" bench/plans/compare.py --models "$PLAN_MODELS" --nps "$nps_csv" --rounds "$ROUNDS" $steps ||
			failed="$failed 3"
		;;
	4)
		echo
		echo "## 4. the compiler ($(date -u +%H:%M:%S), load $(cut -d" " -f1 /proc/loadavg))"
		# shellcheck disable=SC2086
		"$PY" bench/compiler/compiler.py $compiler_runs || failed="$failed 4"
		;;
	esac
done
echo
echo "# done in $(($(date +%s) - started)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$failed" ]; then
	echo "bench: comparison(s)$failed failed (see above)" >&2
	exit 1
fi
