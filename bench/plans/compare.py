"""Comparison 3: bucketing plans against each other on the same model (CPU backend).

The plans are bench/plans/MODEL_PLAN.sync: the same step (the model's simulated backward, each
bucket all-reduced as soon as its gradients are ready, `wait comm`), different buckets:
  per_tensor           one allreduce per tensor, in ready order (`bucket each { * } cap 1B`)
  per_tensor_declared  one allreduce per tensor through implicit buckets (`allreduce *`), issued
                       in declaration order, the naive way to write it
  ddp                  PyTorch DDP's plan: cap 25MiB, first 1MiB, reverse order
  one                  one bucket
  cap4 cap25 cap64 cap128   caps of 4, 25, 64, 128 MiB in reverse order, no small first bucket
Each round runs every plan once, in a rotated order (round r starts with plan r), so that slow
phases of a loaded machine spread over the plans; medians over the rounds.

    python3 bench/plans/compare.py [--models resnet50] [--nps 2,4] [--rounds 3]
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddp"))
import benchlib as bl  # noqa: E402

PLANS = ["per_tensor", "per_tensor_declared", "ddp", "one", "cap4", "cap25", "cap64", "cap128"]
MODELS = {"resnet50": (8, 2), "bert_large": (3, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--nps", default="2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--out", default=os.path.join(bl.OUT, "plans"))
    ap.add_argument("--results", default="plans.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    plans = args.plans.split(",")

    rec = {"comparison": "bucketing plans", "machine": bl.machine(), "rounds": args.rounds, "commands": {},
           "results": []}
    for model in args.models.split(","):
        steps, warmup = MODELS.get(model, (20, 3))
        steps = args.steps or steps
        warmup = args.warmup if args.warmup is not None else warmup
        progs = {}
        for p in plans:
            src = os.path.join(bl.ROOT, "bench", "plans", "%s_%s.sync" % (model, p))
            progs[p] = bl.build(src, os.path.join(args.out, "%s_%s" % (model, p)))
            rec["commands"]["%s %s" % (model, p)] = (
                "bin/syncgen build %s -o PROG && mpirun %s -np NP PROG --backend cpu --steps %d --warmup %d "
                "--check off --quiet --json F" % (os.path.relpath(src, bl.ROOT), " ".join(bl.mpirun_args()),
                                                   steps, warmup))
        for np_ in [int(v) for v in args.nps.split(",")]:
            runs = {p: [] for p in plans}
            for r in range(args.rounds):
                bl.log("# %s np=%d round %d/%d (load %s)" % (model, np_, r + 1, args.rounds, " ".join(bl.loadavg())))
                order = plans[r % len(plans):] + plans[:r % len(plans)]
                for p in order:
                    j = os.path.join(args.out, "%s_%s_%d.json" % (model, p, np_))
                    d = bl.run_program(progs[p], np_, steps, warmup, j, timeout=300)
                    s = d["summary"]
                    runs[p].append({"step_p50_ms": s["step_p50_ms"], "step_mean_ms": s["step_mean_ms"],
                                    "compute_ms": s["compute_ms"],
                                    "exposed_communication_ms": s["exposed_communication_ms"],
                                    "communication_ms": s["communication_ms"], "buckets": len(d["buckets"]),
                                    "bucket_time_us_sum": sum(b["time_us"] for b in d["buckets"]),
                                    "wall_s": d["_wall_s"]})
                    bl.log("#   %-20s %4d buckets: step p50 %8.2f ms, compute %8.2f, exposed %8.2f, comm %8.2f" % (
                        p, len(d["buckets"]), s["step_p50_ms"], s["compute_ms"], s["exposed_communication_ms"],
                        s["communication_ms"]))
            for p in plans:
                rs = runs[p]
                row = {"model": model, "ranks": np_, "plan": p, "buckets": rs[0]["buckets"], "steps": steps,
                       "warmup": warmup, "rounds": rs}
                for k in ("step_p50_ms", "step_mean_ms", "compute_ms", "exposed_communication_ms",
                          "communication_ms", "bucket_time_us_sum"):
                    row[k] = bl.median([x[k] for x in rs])
                rec["results"].append(row)
            ddp = [x for x in rec["results"] if x["model"] == model and x["ranks"] == np_ and x["plan"] == "ddp"]
            for x in rec["results"]:
                if x["model"] == model and x["ranks"] == np_ and ddp:
                    x["step_vs_ddp"] = bl.ratio(x["step_p50_ms"], ddp[0]["step_p50_ms"])
                    x["exposed_vs_ddp"] = bl.ratio(x["exposed_communication_ms"], ddp[0]["exposed_communication_ms"])
    rec["load_average_at_end"] = bl.loadavg()
    path = bl.write_results(args.results, rec)

    bl.log("\n## bucketing plans, medians of %d rounds; vs ddp = this plan / DDP's plan (< 1: faster)" % args.rounds)
    bl.log("| model | ranks | plan | buckets | step p50 (ms) | vs ddp | compute (ms) | exposed comm (ms) | vs ddp "
           "| comm (ms) | sum of bucket times (ms) |")
    bl.log("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rec["results"]:
        bl.log("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            x["model"], x["ranks"], x["plan"], x["buckets"], bl.fmt(x["step_p50_ms"]), bl.fmt(x.get("step_vs_ddp")),
            bl.fmt(x["compute_ms"]), bl.fmt(x["exposed_communication_ms"]), bl.fmt(x.get("exposed_vs_ddp")),
            bl.fmt(x["communication_ms"]), bl.fmt(x["bucket_time_us_sum"] / 1000 if x["bucket_time_us_sum"] else None)))
    bl.log("# results: %s" % os.path.relpath(path, bl.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
