#!/bin/sh
# bench/between/run.sh: C's 4 KiB allreduce with nothing, 80 KiB of other code,
# or 64/256 KiB of data touched between the calls, in paired rounds (the
# per-call mean in us, max over ranks). See gen.py and docs/performance.md.
#
#   MPIRUN_ARGS="--bind-to core" ROUNDS=6 sh bench/between/run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/syncgen-between
mkdir -p "$out"
args=${MPIRUN_ARGS:-"--oversubscribe --bind-to none"}
if [ "$(id -u)" = 0 ]; then args="$args --allow-run-as-root"; fi
python3 "$here/gen.py" >"$out/between.c"
mpicc -O2 -o "$out/between" "$out/between.c"
r=0
while [ "$r" -lt "${ROUNDS:-6}" ]; do
	l=""
	for m in "none 0" "code 64" "data 64" "data 256"; do
		# shellcheck disable=SC2086
		l="$l $(mpirun $args -np 2 "$out/between" "${BYTES:-4096}" 40000 $m | awk '{print $3}')"
	done
	echo "$l"
	r=$((r + 1))
done | awk '{printf "none %.3f  code %.3f (%+.3f)  data64 %.3f (%+.3f)  data256 %.3f (%+.3f)\n", $1, $2, $2-$1, $3, $3-$1, $4, $4-$1}'
