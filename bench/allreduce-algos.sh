#!/bin/sh
# bench/allreduce-algos.sh: Open MPI's allreduce algorithms side by side, for the sizes a plan's
# collectives reach MPI with (the CPU backend's pieces are 1 MiB by default), so that the
# runtime's rules file (runtime/internal/mpihost/settings.go) picks from measurements, not from
# Open MPI's fixed decision alone. C's MPI_Allreduce (bench/mpi_allreduce.c) runs once per rank
# count and algorithm with the runtime's shared-memory settings; algorithm 0 is Open MPI's own
# decision, 1 to 6 are forced through coll/tuned's dynamic rules:
#
#   1 basic linear, 2 nonoverlapping (reduce + bcast), 3 recursive doubling, 4 ring,
#   5 segmented ring, 6 rabenseifner (reduce-scatter + allgather)
#
# The calls cycle through a pool of POOL bytes a rank (bench/mpi_allreduce.c -p), so the data
# comes from memory as a plan's gradients do (resnet50's are 97.5 MiB a rank); POOL=0 keeps one
# buffer, which stays in the cache. PIECE splits every call into blocking calls of that many bytes,
# as the runtime does. Prints busbw in GB/s (nccl-tests' factor), one row a size, one column an
# algorithm, the best of the row marked with *.
#
#   sh bench/allreduce-algos.sh
#   NPS="4 8" SIZES="1M 4M" POOL=128M PIECE=1M sh bench/allreduce-algos.sh
#
# Knobs: NPS ("2 4 8"), SIZES ("64K 256K 1M 4M 16M"), ALGS ("0 1 2 3 4 5 6"), POOL (128M), PIECE
# (unset), ITERS (calls a size, 0: about 1 s of work at 1 GB/s), MPIRUN_ARGS ("--oversubscribe
# --bind-to none", plus --allow-run-as-root as root). Needs mpicc; no Go.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
NPS=${NPS:-"2 4 8"}
SIZES=${SIZES:-"64K 256K 1M 4M 16M"}
ALGS=${ALGS:-"0 1 2 3 4 5 6"}
POOL=${POOL:-128M}
ITERS=${ITERS:-0}
args=${MPIRUN_ARGS:-"--oversubscribe --bind-to none"}
[ "$(id -u)" = 0 ] && args="$args --allow-run-as-root"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O3 -march=native -o "$out/mpi_allreduce" "$root/bench/mpi_allreduce.c"
sm=vader
case $(mpirun --version | head -1) in *" "[5-9].*) sm=sm ;; esac
transport="-x OMPI_MCA_btl_${sm}_eager_limit=32768 -x OMPI_MCA_btl_${sm}_fbox_size=32768"
mode="-m blocking"
[ -n "${PIECE:-}" ] && mode="-m chunked-blocking -c $PIECE"

echo "# Open MPI allreduce algorithms ($(mpirun --version | head -1)), f32 sum, busbw GB/s, pool $POOL, piece ${PIECE:-whole}"
for np in $NPS; do
	: >"$out/table"
	for alg in $ALGS; do
		rules=""
		[ "$alg" != 0 ] && rules="-x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_allreduce_algorithm=$alg"
		for s in $SIZES; do
			# shellcheck disable=SC2086
			bw=$(mpirun $args $transport $rules -np "$np" "$out/mpi_allreduce" -b "$s" -e "$s" -n "$ITERS" \
				-w 3 -p "$POOL" $mode | awk '!/^#/ {print $1, $4}')
			echo "$alg $bw" >>"$out/table"
		done
	done
	awk -v np="$np" -v algs="$ALGS" '
		{ bw[$2, $1] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
		END {
			k = split(algs, a, " ")
			printf "# ranks %d\n# %12s", np, "bytes"
			for (i = 1; i <= k; i++) printf " %9s", "alg" a[i]
			printf "\n"
			for (j = 1; j <= n; j++) {
				s = order[j]; top = 0
				for (i = 1; i <= k; i++) if (bw[s, a[i]] > top) top = bw[s, a[i]]
				printf "  %12d", s
				for (i = 1; i <= k; i++) printf " %8.3f%s", bw[s, a[i]], bw[s, a[i]] == top ? "*" : " "
				printf "\n"
			}
		}' "$out/table"
done
