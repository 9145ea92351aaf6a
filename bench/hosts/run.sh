#!/bin/sh
# bench/hosts/run.sh: flat against hierarchical allreduces on 2 hosts x 2 ranks of the emulated
# cluster (scripts/cluster.sh, as root): one allreduce of SIZES (default 64 KiB, 1 MiB, 16 MiB and
# 256 MiB), then examples/resnet50.sync as written (flat) and with `algo hierarchical` on its
# allreduce. For each: the buckets' time summed (the report's: the maximum over ranks of each
# rank's mean over the measured steps), busbw, the median step, the phase times of the
# hierarchical form, the formula's bytes across hosts a step per host and the bytes counted on
# each host's eth0 (SYNCGEN_NET_IFACE) over the measured steps.
# Open MPI picks the flat allreduce's algorithm as it would for a user (RING=1 pins its ring, the
# algorithm the flat formula assumes). Prints Markdown tables; the JSON reports stay in OUT.
#
#   sudo sh bench/hosts/run.sh
#   SIZES="1M 64M" STEPS=10 sudo sh bench/hosts/run.sh
#   RING=1 sudo sh bench/hosts/run.sh
#
# Knobs: SIZES, STEPS (measured steps, default 5; 256 MiB runs STEPS_BIG, default 3), WARMUP (1),
# RING (0), OUT (bench/out/hosts). The traffic between the hosts crosses a bridge inside the
# machine: its speed is the machine's memory and TCP stack, not a NIC's.
set -eu
cd "$(dirname "$0")/../.."
SIZES=${SIZES:-"64K 1M 16M 256M"}
STEPS=${STEPS:-5}
STEPS_BIG=${STEPS_BIG:-3}
WARMUP=${WARMUP:-1}
RING=${RING:-0}
OUT=${OUT:-bench/out/hosts}
mkdir -p "$OUT"
go build -o "$OUT/syncgen" ./cmd/syncgen

# elems SIZE prints the f32 elements of SIZE (64K, 1M, ...).
elems() {
	case $1 in
	*K) echo $((${1%K} * 256)) ;;
	*M) echo $((${1%M} * 262144)) ;;
	*) echo "bench/hosts: size $1: use K or M" >&2; exit 2 ;;
	esac
}

jobs=""
for size in $SIZES; do
	for algo in flat hierarchical; do
		name="ar_${size}_$algo"
		cat >"$OUT/$name.sync" <<PLAN
tensor g f32[$(elems "$size")]
stream compute
stream comm
bucket g { g }
step {
    backward 1ms on compute
    allreduce g op sum algo $algo on comm after ready
    wait comm
}
PLAN
		"$OUT/syncgen" build -o "$OUT/$name" "$OUT/$name.sync" >/dev/null
		steps=$STEPS
		[ "$size" = 256M ] && steps=$STEPS_BIG
		jobs="$jobs $name:$steps"
	done
done
cp examples/resnet50.sync "$OUT/resnet50_flat.sync"
sed 's/^\( *allreduce grads op avg\) on comm/\1 algo hierarchical on comm/' examples/resnet50.sync >"$OUT/resnet50_hierarchical.sync"
grep -q 'algo hierarchical' "$OUT/resnet50_hierarchical.sync" || { echo "bench/hosts: resnet50's allreduce line changed; fix the sed" >&2; exit 1; }
for algo in flat hierarchical; do
	"$OUT/syncgen" build -o "$OUT/resnet50_$algo" "$OUT/resnet50_$algo.sync" >/dev/null
	jobs="$jobs resnet50_$algo:$STEPS"
done

ring=""
[ "$RING" = 1 ] && ring="-x OMPI_MCA_coll_tuned_use_dynamic_rules=1 -x OMPI_MCA_coll_tuned_allreduce_algorithm=4"
script="$OUT/jobs.sh"
: >"$script"
for j in $jobs; do
	name=${j%:*}
	steps=${j#*:}
	echo "mpirun --allow-run-as-root --oversubscribe --bind-to none --host a:2,b:2 -np 4 $ring $OUT/$name --steps $steps --warmup $WARMUP --check 1000 --backend cpu --quiet --json $OUT/$name.json || exit 1" >>"$script"
done
echo "bench/hosts: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(echo "$jobs" | wc -w) jobs on 2 hosts x 2 ranks" >&2
sh scripts/cluster.sh --hosts a:2,b:2 -- sh "$script"
python3 - "$OUT" $jobs <<'PY'
import json, sys
out, jobs = sys.argv[1], [j.split(":")[0] for j in sys.argv[2:]]
def load(name):
    with open(f"{out}/{name}.json") as f:
        return json.load(f)
print("| plan | algo | bytes | time (us) | busbw (GB/s) | step p50 (ms) | phases: RS / AR across / AG (us) | formula B/step/host | counted B/step (a, b) | counted GB/s (a) | wrong |")
print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
for name in jobs:
    r = load(name)
    plan, algo = name.rsplit("_", 1)
    bs = r["buckets"]
    t = sum(b["time_us"] for b in bs)
    by = sum(b["bytes"] for b in bs)
    bus = sum(b["busbw_gbs"] * b["time_us"] for b in bs) / t if t else 0
    ph = "-"
    if all(b.get("phases") for b in bs):
        p = [sum(b["phases"][i]["time_us"] for b in bs) for i in range(3)]
        ph = " / ".join(f"{x:.0f}" for x in p)
    formula = sum(b.get("cross_host_bytes_per_host") or 0 for b in bs)
    net = r.get("network") or {"hosts": []}
    counted = ", ".join(f"{h['tx_bytes_per_step']:.0f}" for h in net["hosts"]) or "-"
    gbs = f"{net['hosts'][0]['tx_gbs']:.3f}" if net["hosts"] else "-"
    print(f"| {plan} | {algo} | {by} | {t:.0f} | {bus:.3f} | {r['summary']['step_p50_ms']:.2f} | {ph} | {formula:.0f} | {counted} | {gbs} | {r['summary']['wrong']} |")
PY
