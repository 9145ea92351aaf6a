#!/bin/sh
# bench/hetero/run.sh: a mixed cluster, 4 ranks of which the last runs at half speed, with a
# global batch of 256 (examples/mixed_cluster.sync on the CPU backend): the median step time unbalanced
# (64 samples a rank), balanced statically from the declared speeds, and balanced dynamically
# from the ranks' measured compute every 5 steps. The durations are simulated, so the ideal
# speed-up of a balanced step is 1.75x (the slow rank's 64 samples at half speed against
# 256/3.5 samples at full speed), less the communication that the balance does not shorten.
# Writes bench/results/hetero.json and prints one line per mode and the speed-ups. It gives
# --speed, --batch and --balance every time, which replace the example's own `ranks` declaration.
#
#   sh bench/hetero/run.sh
#   NP=4 STEPS=40 SLOW=0.5 sh bench/hetero/run.sh
#   BACKEND=nccl PREBUILT=.devbin/hetero sh bench/hetero/run.sh   # the GPU machine (no Go)
#   JSON=/tmp/out/hetero.json sh bench/hetero/run.sh    # the result elsewhere (default bench/results/hetero.json)
#
# A failed run leaves the result file as it was and no temporary file.
set -eu
cd "$(dirname "$0")/../.."
NP=${NP:-4}
STEPS=${STEPS:-30}
SLOW=${SLOW:-0.5}
BATCH=${BATCH:-256}
BACKEND=${BACKEND:-cpu}
out=${PREBUILT:-bench/out/hetero}
mpi="--oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
if [ -z "${PREBUILT:-}" ]; then
	mkdir -p "$out"
	go build -o "$out/syncgen" ./cmd/syncgen
	"$out/syncgen" build -o "$out/mixed_cluster" examples/mixed_cluster.sync
fi
slow=$((NP - 1))
p50() { sed -n 's/.*"step_p50_ms": \([0-9.e+-]*\).*/\1/p' "$1" | head -1; }
json=${JSON:-bench/results/hetero.json}
trap 'rm -f "$json.tmp"' EXIT
trap 'exit 1' HUP INT TERM
printf '{\n  "ranks": %d, "slow_rank": %d, "slow_speed": %s, "batch": %d, "steps": %d, "backend": "%s",\n  "step_p50_ms": {' \
	"$NP" "$slow" "$SLOW" "$BATCH" "$STEPS" "$BACKEND" >"$json.tmp"
sep=""
for mode in off static dynamic:5; do
	f="$out/$(echo "$mode" | tr : _).json"
	rm -f "$f"
	# shellcheck disable=SC2086
	mpirun -np "$NP" $mpi -x NCCL_NVLS_ENABLE=0 "$out/mixed_cluster" --steps "$STEPS" --warmup 2 --check 10 \
		--backend "$BACKEND" --speed "$slow=$SLOW" --batch "$BATCH" --balance "$mode" --quiet --json "$f" >/dev/null
	m=$(p50 "$f")
	[ -n "$m" ] || { echo "bench/hetero: balance $mode wrote no step_p50_ms to $f" >&2; exit 1; }
	echo "balance $mode: step p50 $m ms"
	printf '%s "%s": %s' "$sep" "$mode" "$m" >>"$json.tmp"
	sep=","
	case $mode in
	off) mean_off=$m ;;
	static) mean_static=$m ;;
	*) mean_dynamic=$m ;;
	esac
done
printf ' }\n}\n' >>"$json.tmp"
mv "$json.tmp" "$json"
awk -v off="$mean_off" -v st="$mean_static" -v dy="$mean_dynamic" 'BEGIN {
	printf "speed-up over unbalanced: static %.2fx, dynamic %.2fx (ideal 1.75x at half speed)\n", off / st, off / dy }'
