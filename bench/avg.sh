#!/bin/sh
# bench/avg.sh: an average allreduce against a sum of the same size, through the runtime on the
# CPU backend (issue 25: `op avg` should cost what `op sum` does). Each run is paired: testprog's
# avgsum plan allreduces two buckets of the same size and dtype in every step, one with op sum
# and one with op avg, the host waiting after each, their order swapped every step, so both see
# the same load on the machine at the same moments. A run gives each bucket's median step time
# (time_median_us of --json) and their ratio avg / sum; a cell is the median over ROUNDS runs.
# ALGOS names values of SYNCGEN_CPU_DIVIDE to compare, one paired run each: auto, inline (the MPI
# thread divides each piece after its call) and ahead (a thread of its own divides while the
# next piece is reduced).
#
#   sh bench/avg.sh                                   # builds testprog, 2 and 4 ranks
#   NPS="2 4 8" ALGOS="inline ahead" PREBUILT=.devbin/cpu sh bench/avg.sh  # no Go needed
#
# For f32 rows it also prints what the same average costs a C program (bench/mpi_allreduce.c, built
# with mpicc): `C avg/sum` is MPI_Allreduce with MPI_SUM followed by a vectorised division of every
# element, against MPI_SUM alone; at 2 ranks `C op/sum` is a user-defined operator that adds and
# halves. MPI has no average operator, so these are the floor the runtime's ratios are held to.
# C=0 leaves them out (the default where there is no mpicc).
#
# Knobs: ALGOS ("auto"), C (1 with mpicc), NPS ("2 4"), SIZES ("1MiB 25MiB 256MiB"), DTYPES ("f32 f16 bf16"), ROUNDS (3), STEPS
# (by size: 1 GiB over the buffer's size, between 10 and 200, so that a small buffer's median
# comes from as many steps as its noise needs), MPIRUN_ARGS ("--oversubscribe --bind-to none",
# plus --allow-run-as-root as root).
set -eu
cd "$(dirname "$0")/.."
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-"1MiB 25MiB 256MiB"}
DTYPES=${DTYPES:-"f32 f16 bf16"}
ROUNDS=${ROUNDS:-3}
ALGOS=${ALGOS:-auto}
STEPS=${STEPS:-}
C=${C:-$(command -v mpicc >/dev/null && echo 1 || echo 0)}
MPIRUN_ARGS=${MPIRUN_ARGS:-"--oversubscribe --bind-to none"}
[ "$(id -u)" = 0 ] && MPIRUN_ARGS="$MPIRUN_ARGS --allow-run-as-root"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ -n "${PREBUILT:-}" ]; then
	prog=$PREBUILT/testprog
else
	prog=$out/testprog
	go build -o "$prog" ./runtime/internal/testprog
fi
if [ "$C" = 1 ]; then
	mpicc -O3 -march=native -o "$out/mpi_allreduce" bench/mpi_allreduce.c
fi
# steps_for SIZE: 1 GiB over SIZE (KiB, MiB or GiB), clamped to 10..200.
steps_for() {
	awk -v s="$1" 'BEGIN {
		n = s + 0; u = s; sub(/^[0-9.]+/, "", u)
		m = u == "KiB" ? n / 1024 : u == "GiB" ? n * 1024 : n
		k = int(1024 / m); if (k < 10) k = 10; if (k > 200) k = 200; print k
	}'
}
# paired NP SIZE DTYPE ALGO: one line "sum_us avg_us ratio" from a paired run.
paired() {
	steps=$STEPS
	[ -n "$steps" ] || steps=$(steps_for "$2")
	# shellcheck disable=SC2086
	SYNCGEN_CPU_DIVIDE=$4 mpirun -np "$1" $MPIRUN_ARGS -x SYNCGEN_CPU_DIVIDE "$prog" "avgsum:$2:$3" \
		--steps "$steps" --warmup 3 --check off --quiet --json "$out/r.json" >/dev/null
	python3 -c '
import json, sys
t = {b["bucket"]: b["time_median_us"] for b in json.load(open(sys.argv[1]))["buckets"]}
print(t["sum"], t["avg"], t["avg"] / t["sum"])' "$out/r.json"
}
# c_ratio NP SIZE MODE: one line "ratio" from C runs of MODE and of MPI_SUM alone, each the
# maximum over ranks of the calls' median time.
c_ratio() {
	for m in blocking "$3"; do
		# shellcheck disable=SC2086
		mpirun -np "$1" $MPIRUN_ARGS "$out/mpi_allreduce" -b "$2" -e "$2" -m "$m" | awk '!/^#/ {print $5}'
	done | awk 'NR == 1 {s = $1} NR == 2 {print $1 / s}'
}
# median COLUMN: the median of that column of stdin.
median() { awk -v c="$1" '{print $c}' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "# op avg against op sum, paired in one run (bench/avg.sh): medians over $ROUNDS runs of each bucket's median step time in us, and of the runs' ratios avg / sum"
printf '# %5s %8s %5s' ranks size dtype
for a in $ALGOS; do printf ' %12s %12s %8s' "sum($a)" "avg-$a" ratio; done
[ "$C" = 1 ] && printf ' %10s %10s' "C avg/sum" "C op/sum"
echo
for np in $NPS; do
	for size in $SIZES; do
		for dt in $DTYPES; do
			for a in $ALGOS; do : >"$out/runs-$a"; done
			: >"$out/c-avg"
			: >"$out/c-op"
			for _ in $(seq "$ROUNDS"); do
				for a in $ALGOS; do paired "$np" "$size" "$dt" "$a" >>"$out/runs-$a"; done
				if [ "$C" = 1 ] && [ "$dt" = f32 ]; then
					c_ratio "$np" "$size" avg >>"$out/c-avg"
					[ "$np" = 2 ] && c_ratio "$np" "$size" avg2 >>"$out/c-op"
				fi
			done
			printf '  %5s %8s %5s' "$np" "$size" "$dt"
			for a in $ALGOS; do
				printf ' %12.1f %12.1f %8.3f' "$(median 1 <"$out/runs-$a")" "$(median 2 <"$out/runs-$a")" "$(median 3 <"$out/runs-$a")"
			done
			if [ "$C" = 1 ]; then
				for f in c-avg c-op; do
					if [ -s "$out/$f" ]; then printf ' %10.3f' "$(median 1 <"$out/$f")"; else printf ' %10s' -; fi
				done
			fi
			echo
		done
	done
done
