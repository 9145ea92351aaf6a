#!/bin/sh
# bench/avg.sh: an average allreduce against a sum of the same buffer, one bucket alone in the
# step, through the runtime on the CPU backend (issue 25: `op avg` should cost what `op sum`
# does). The two alternate for ROUNDS rounds; each cell is the median over rounds of the
# bucket's median step time (time_median_us of --json), and the ratio is avg / sum. ALGOS names
# values of SYNCGEN_CPU_DIVIDE to compare: auto, inline (the MPI thread divides each piece after
# its call) and ahead (a thread of its own divides while the next piece is reduced).
#
#   sh bench/avg.sh                                   # builds testprog, 2 and 4 ranks
#   NPS="2 4 8" ALGOS="inline ahead" PREBUILT=.devbin/cpu sh bench/avg.sh  # no Go needed
#
# Knobs: ALGOS ("auto"), NPS ("2 4"), SIZES ("1MiB 25MiB 256MiB"), DTYPES ("f32 f16 bf16"), ROUNDS (3), STEPS
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
# steps_for SIZE: 1 GiB over SIZE (KiB, MiB or GiB), clamped to 10..200.
steps_for() {
	awk -v s="$1" 'BEGIN {
		n = s + 0; u = s; sub(/^[0-9.]+/, "", u)
		m = u == "KiB" ? n / 1024 : u == "GiB" ? n * 1024 : n
		k = int(1024 / m); if (k < 10) k = 10; if (k > 200) k = 200; print k
	}'
}
# one NP SIZE DTYPE OP ALGO: the bucket's median step time in microseconds.
one() {
	steps=$STEPS
	[ -n "$steps" ] || steps=$(steps_for "$2")
	# shellcheck disable=SC2086
	SYNCGEN_CPU_DIVIDE=$5 mpirun -np "$1" $MPIRUN_ARGS -x SYNCGEN_CPU_DIVIDE "$prog" "allreduce:$2:$4:$3" \
		--steps "$steps" --warmup 3 --check off --quiet --json "$out/r.json" >/dev/null
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["buckets"][0]["time_median_us"])' "$out/r.json"
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "# op avg against op sum, one bucket alone in the step (bench/avg.sh), medians of the bucket's median step time in us"
printf '# %5s %8s %5s %12s' ranks size dtype sum
for a in $ALGOS; do printf ' %12s %8s' "avg-$a" ratio; done
echo
for np in $NPS; do
	for size in $SIZES; do
		for dt in $DTYPES; do
			: >"$out/sum"
			for a in $ALGOS; do : >"$out/avg-$a"; done
			for _ in $(seq "$ROUNDS"); do
				one "$np" "$size" "$dt" sum auto >>"$out/sum"
				for a in $ALGOS; do one "$np" "$size" "$dt" avg "$a" >>"$out/avg-$a"; done
			done
			s=$(median <"$out/sum")
			printf '  %5s %8s %5s %12.1f' "$np" "$size" "$dt" "$s"
			for a in $ALGOS; do
				v=$(median <"$out/avg-$a")
				printf ' %12.1f %8.3f' "$v" "$(awk "BEGIN {print $v / $s}")"
			done
			echo
		done
	done
done
