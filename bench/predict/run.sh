#!/bin/sh
# bench/predict/run.sh: how far the cost model's prediction is from the
# measured step. For each rank count it calibrates a profile (syncgen
# calibrate, the collectives of the plans below), then runs each model
# with DDP's plan and three other caps (bench/plans/MODEL_PLAN.sync) given
# that profile: the program itself prints the prediction (the same replay
# as syncgen predict) beside what it measured. The plans alternate for
# ROUNDS rounds; one row per plan: the predicted step, the median and the
# best of the rounds' measured p50s, and the error against each in
# percent (on a shared machine the best estimates a quiet one).
# With TUNE=1 (and Go), it then tunes each model at each rank count
# (syncgen tune --run 3) and runs DDP's plan and the winner alternately,
# ROUNDS times each, printing their measured p50s.
#
#   sh bench/predict/run.sh                      # 2 and 4 ranks
#   NPS=2 MODELS=resnet50 sh bench/predict/run.sh
#   PREBUILT=.devbin/predict NPS="1 8" BACKEND=nccl sh bench/predict/run.sh   # GPU machine
#
# Knobs: NPS ("2 4"), MODELS ("resnet50 bert_large"), PLANS ("ddp cap4
# cap64 cap128"), STEPS (20), BACKEND (cpu), FULL=1 (the full sweep,
# 4 B .. 256 MiB), TUNE=1, ROUNDS (3), MPIRUN_ARGS (as bench/allreduce.sh),
# PREBUILT: a folder with syncgen, calibrate_sync and calibrate_full_sync
# (syncgen calibrate --emit, built) and MODEL_PLAN programs, for a machine
# without Go (scripts/gpu-check.sh build makes it, .devbin/predict).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-${TMPDIR:-/tmp}/syncgen-bench-predict}
mkdir -p "$out"
NPS=${NPS:-"2 4"}
MODELS=${MODELS:-"resnet50 bert_large"}
PLANS=${PLANS:-"ddp cap4 cap64 cap128"}
STEPS=${STEPS:-20}
BACKEND=${BACKEND:-cpu}
ROUNDS=${ROUNDS:-3}
args=${MPIRUN_ARGS:-"--oversubscribe --bind-to none"}
if [ "$(id -u)" = 0 ]; then args="$args --allow-run-as-root"; fi
sweep=""
if [ "${FULL:-}" = 1 ]; then sweep="--full"; fi

if [ -n "${PREBUILT:-}" ]; then
	sg=$PREBUILT/syncgen
	bin=$PREBUILT
else
	sg=$out/syncgen
	bin=$out/bin
	mkdir -p "$bin"
	(cd "$root" && go build -o "$sg" ./cmd/syncgen)
	for m in $MODELS; do
		for p in $PLANS; do
			"$sg" build -o "$bin/${m}_$p" "$root/bench/plans/${m}_$p.sync" >/dev/null
		done
	done
fi
calplan=$root/bench/plans/resnet50_ddp.sync

# field FILE KEY: a number from the run's JSON summary.
field() { sed -n "s/.*\"$2\": *\([-0-9.e+]*\).*/\1/p" "$1" | head -1; }

echo "# syncgen $($sg --version | awk '{print $NF}'), $(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $(nproc) cores, backend $BACKEND, commit $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo -)"
for np in $NPS; do
	prof=$out/profile-np$np.json
	if [ -n "${PREBUILT:-}" ]; then
		calprog=$bin/calibrate_sync
		if [ -n "$sweep" ]; then calprog=$bin/calibrate_full_sync; fi
		"$sg" calibrate --np "$np" --plan "$calplan" $sweep --backend "$BACKEND" --program "$calprog" -o "$prof" >"$out/calibrate-np$np.txt" 2>&1
	else
		"$sg" calibrate --np "$np" --plan "$calplan" $sweep --backend "$BACKEND" -o "$prof" >"$out/calibrate-np$np.txt" 2>&1
	fi
	echo "# ranks $np: profile $prof"
	# The plans alternate, ROUNDS rounds: a neighbour's burst of load
	# then hits one round of every plan, not every round of one.
	rows=$out/rows-np$np.txt
	: >"$rows"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for m in $MODELS; do
			for p in $PLANS; do
				j=$out/${m}_$p-np$np-r$r.json
				# A run that fails (a rank killed for memory) is said and
				# left out; the others go on.
				# shellcheck disable=SC2086
				if mpirun $args -np "$np" "$bin/${m}_$p" --backend "$BACKEND" --steps "$STEPS" --warmup 3 --check off --quiet \
					--profile "$prof" --json "$j" --flight-dir "$out/flightrec" >"$out/${m}_$p-np$np-r$r.txt" 2>&1; then
					echo "$m $p $(field "$j" predicted_step_ms) $(field "$j" step_p50_ms)" >>"$rows"
				else
					echo "# $m $p ranks $np round $r failed: see $out/${m}_$p-np$np-r$r.txt"
				fi
			done
		done
		r=$((r + 1))
	done
	# Per plan: the prediction, the median and the best of the rounds'
	# p50s, and the error against each.
	printf '%-11s %5s %-7s %14s %14s %14s %14s %14s\n' model ranks plan "predicted(ms)" "p50 median(ms)" "error(%)" "p50 best(ms)" "error(%)"
	for m in $MODELS; do
		for p in $PLANS; do
			awk -v m="$m" -v p="$p" -v np="$np" '$1 == m && $2 == p { pred = $3; v[n++] = $4 }
				END {
					if (n == 0) { printf "%-11s %5s %-7s %14s\n", m, np, p, "no run succeeded"; exit }
					for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
					med = (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
					printf "%-11s %5s %-7s %14.2f %14.2f %14.1f %14.2f %14.1f\n", m, np, p, pred, med, 100 * (pred - med) / med, v[0], 100 * (pred - v[0]) / v[0]
				}' "$rows"
		done
	done
	if [ "${TUNE:-}" = 1 ] && [ -z "${PREBUILT:-}" ]; then
		for m in $MODELS; do
			tuned=$out/${m}_tuned-np$np.sync
			"$sg" tune --np "$np" --profile "$prof" --run 3 --args "--steps $STEPS --warmup 3 --backend $BACKEND" \
				--out "$tuned" --plot "$out/${m}-np$np.svg" "$root/bench/plans/${m}_ddp.sync" >"$out/tune-${m}-np$np.txt" 2>&1
			"$sg" build -o "$bin/${m}_tuned" "$tuned" >/dev/null
			winner=$(sed -n 's/^# winner[^:]*: //p' "$out/tune-${m}-np$np.txt")
			r=0
			while [ $r -lt "$ROUNDS" ]; do
				for p in ddp tuned; do
					j=$out/${m}_$p-np$np-r$r.json
					# shellcheck disable=SC2086
					mpirun $args -np "$np" "$bin/${m}_$p" --backend "$BACKEND" --steps "$STEPS" --warmup 3 --check off --quiet --json "$j" \
						--flight-dir "$out/flightrec" >/dev/null 2>&1 || echo "# tune $m $p ranks $np round $r failed"
					printf '# tune %-11s ranks %s round %s %-6s p50 %s ms\n' "$m" "$np" "$r" "$p" "$(field "$j" step_p50_ms)"
				done
				r=$((r + 1))
			done
			echo "# tune $m ranks $np winner: $winner"
		done
	fi
done
