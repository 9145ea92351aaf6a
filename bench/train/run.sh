#!/bin/sh
# bench/train/run.sh: the optimizer update pipelined per bucket (after synced) against one
# update after the whole sync (after comm), resnet50 and bert_large with DDP's buckets, on the
# CPU backend (or NCCL with BACKEND=nccl and PREBUILT=DIR holding the built programs, for the
# GPU machine, which has no Go). Prints each plan's summary lines: step time, the update's time
# and the share of it that ran while communication did.
#
#   sh bench/train/run.sh                   # 2 ranks, CPU
#   NP=4 STEPS=30 sh bench/train/run.sh
#   BACKEND=nccl NP=1 PREBUILT=.devbin/train sh bench/train/run.sh
set -eu
cd "$(dirname "$0")/../.."
NP=${NP:-2}
STEPS=${STEPS:-20}
BACKEND=${BACKEND:-cpu}
out=${PREBUILT:-bench/out/train}
mpi="--oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
if [ -z "${PREBUILT:-}" ]; then
	mkdir -p "$out"
	go build -o "$out/syncgen" ./cmd/syncgen
	for f in bench/train/*.sync; do
		"$out/syncgen" build -o "$out/$(basename "$f" .sync)" "$f"
	done
fi
for m in resnet50 bert_large; do
	for mode in pipelined after; do
		echo "## $m $mode, $NP ranks, backend $BACKEND"
		# shellcheck disable=SC2086
		mpirun -np "$NP" $mpi -x NCCL_NVLS_ENABLE=0 "$out/${m}_$mode" --steps "$STEPS" --backend "$BACKEND" --quiet
	done
done
