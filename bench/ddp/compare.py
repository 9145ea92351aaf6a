"""Comparison 2: syncgen's DDP plan against PyTorch DistributedDataParallel (gloo) on the CPU.

For each model and rank count, ROUNDS rounds of: syncgen (bench/plans/MODEL_ddp.sync, built by
bin/syncgen, run under mpirun with --backend cpu), then PyTorch DDP (bench/ddp/ddp_bench.py under
the same mpirun flags, Debian's /usr/bin/python3 with python3-torch, bucket_cap_mb=25). Two
regimes of the same gradients:
  - "sync": the time of the synchronisation itself, nothing to overlap with. syncgen runs the
    plan without its `backward` (and without `after ready`): each step is the bucket allreduces
    alone, on the gradients' buffers as they are, so the step time is the synchronisation.
    DDP runs a 0 ms simulated backward: its gradients are ready as fast as it allocates and
    fills them (tens of ms); sync time = step - compute (its exposed communication), which if
    anything favours DDP (its first buckets may start while the last gradients are being made).
  - "overlap": the plan as written (resnet50 `backward 60ms`, bert_large `backward 120ms`, each
    bucket all-reduced as soon as it is ready). On the CPU backend the backward lasts at least as
    long as filling the gradients with the runtime's check pattern takes (often longer than the
    plan says), so DDP's simulated backward is given the duration syncgen's backward actually took
    in the same round (its compute_ms): both contenders hide their communication behind the same
    compute timeline. Exposed communication = mean step - compute, as syncgen's report has it.
    DDP runs this regime twice: its backward sleeping ("overlap"), and its backward spinning on
    a core ("overlap-busy"), which is what syncgen's backward does on the CPU while it fills the
    gradients (and what a real CPU backward does): the second one compares the communication
    engines under the same CPU load, the first one shows what that load costs.
Medians over the rounds, and the ratio syncgen / DDP (below 1: syncgen is faster).

    python3 bench/ddp/compare.py [--models resnet50,bert_large] [--nps 2,4] [--rounds 3]
"""

import argparse
import json
import os
import re
import socket
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

# steps, warmup for each model (bert_large moves 1.34 GB a step; keep its runs short). Two warm-up
# steps at least: DDP rebuilds its buckets after its first iteration and allocates them anew.
MODELS = {"resnet50": (10, 2), "bert_large": (3, 2)}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def plan_backward_ms(path):
    m = re.search(r"backward\s+(\d+)ms", open(path).read())
    return int(m.group(1))


def build_programs(model, out, overlap):
    """Builds syncgen's programs of MODEL's DDP plan into OUT: {backward ms: program} for the
    sync regime (0: the plan without its backward) and, if OVERLAP, the plan as written."""
    plan = os.path.join(bl.ROOT, "bench", "plans", model + "_ddp.sync")
    bwd = plan_backward_ms(plan)
    plan0 = os.path.join(out, model + "_ddp_sync.sync")
    with open(plan0, "w") as f:
        f.write(re.sub(r"\n\s*backward\s+\d+ms[^\n]*", "", open(plan).read()).replace(" after ready", ""))
    progs = {0: bl.build(plan0, os.path.join(out, model + "_ddp_sync"))}
    if overlap:
        progs[bwd] = bl.build(plan, os.path.join(out, model + "_ddp"))
    return plan, bwd, progs


def syncgen_summary(rec):
    s = rec["summary"]
    return {
        "step_p50_ms": s["step_p50_ms"],
        "step_mean_ms": s["step_mean_ms"],
        "compute_ms": s["compute_ms"],
        "exposed_communication_ms": s["exposed_communication_ms"],
        "communication_ms": s["communication_ms"],
        "overlap_pct": s["overlap_pct"],
        "step_ms": s["step_ms"],
        "buckets": [{"bucket": b["bucket"], "bytes": b["bytes"], "time_us": b["time_us"], "busbw_gbs": b["busbw_gbs"]}
                    for b in rec["buckets"]],
        "wall_s": rec["_wall_s"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,bert_large")
    ap.add_argument("--nps", default="2,4")
    ap.add_argument("--overlap-models", default="resnet50",
                    help="models that also run the overlap regimes (on the CPU backend bert_large's simulated "
                         "backward lasts seconds: filling 335M gradient elements)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, help="override the measured steps of every model")
    ap.add_argument("--warmup", type=int, help="override the warm-up steps of every model")
    ap.add_argument("--out", default=os.path.join(bl.OUT, "ddp"))
    ap.add_argument("--results", default="ddp.json")
    ap.add_argument("--build-only", action="store_true",
                    help="build syncgen's programs of every model into --out and stop (for PREBUILT=DIR)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.build_only:
        for model in args.models.split(","):
            _, _, progs = build_programs(model, args.out, True)
            bl.log("# built %s" % " ".join(sorted(os.path.relpath(p, bl.ROOT) for p in progs.values())))
        return 0

    torch_v = bl.torch_version()
    if torch_v is None:
        bl.log("# comparison 2 SKIPPED: PyTorch is not installed for %s. Install Debian's package as root:\n"
               "#     apt-get install -y python3-torch\n# then run again." % bl.TORCH_PYTHON)
        return 0

    rec = {"comparison": "syncgen DDP plan vs PyTorch DDP (gloo)", "machine": bl.machine(), "torch": torch_v,
           "rounds": args.rounds, "commands": {}, "results": []}
    rec["machine"]["torch"] = torch_v
    for model in args.models.split(","):
        steps, warmup = MODELS.get(model, (20, 3))
        steps = args.steps or steps
        warmup = args.warmup if args.warmup is not None else warmup
        overlap = model in args.overlap_models.split(",")
        plan, bwd, progs = build_programs(model, args.out, overlap)
        regimes = [("sync", 0), ("overlap", bwd)][:2 if overlap else 1]  # syncgen's
        ddp_regimes = [("sync", "sync"), ("overlap", "overlap"), ("overlap-busy", "overlap")][:3 if overlap else 1]
        model_sync = os.path.join(bl.ROOT, "stdlib", "models", model + ".sync")
        for np_ in [int(v) for v in args.nps.split(",")]:
            runs = {"syncgen": {r: [] for r, _ in regimes}, "ddp": {r: [] for r, _ in ddp_regimes}}
            sg_cmd = "mpirun %s -np %d %s --backend cpu --steps %d --warmup %d --check off --quiet --json F" % (
                " ".join(bl.mpirun_args()), np_, "PROG", steps, warmup)
            ddp_cmd = ("mpirun %s -np %d %s bench/ddp/ddp_bench.py --model %s --backward-ms %s --steps %d "
                       "--warmup %d --bucket-cap-mb 25 --port PORT --json F" % (
                           " ".join(bl.mpirun_args()), np_, bl.TORCH_PYTHON, os.path.relpath(model_sync, bl.ROOT),
                           "0,MS,MSb" if overlap else "0", steps, warmup) +
                       ("  (MS: syncgen's compute_ms of the overlap regime in the same round)" if overlap else ""))
            rec["commands"]["%s np=%d" % (model, np_)] = {
                "syncgen": ["bin/syncgen build %s -o PROG (and, for the sync regime, the same plan without its "
                            "`backward` line and `after ready`)" %
                            os.path.relpath(plan, bl.ROOT), sg_cmd],
                "ddp": ddp_cmd}
            for r in range(args.rounds):
                bl.log("# %s np=%d round %d/%d (load %s)" % (model, np_, r + 1, args.rounds, " ".join(bl.loadavg())))
                for name, ms in regimes:  # A: syncgen
                    j = os.path.join(args.out, "sg_%s_%d_%s.json" % (model, np_, name))
                    s = syncgen_summary(bl.run_program(progs[ms], np_, steps, warmup, j, timeout=300))
                    runs["syncgen"][name].append(s)
                    bl.log("#   syncgen %-7s step p50 %8.2f ms, compute %8.2f, exposed %8.2f, comm %8.2f" % (
                        name, s["step_p50_ms"], s["compute_ms"], s["exposed_communication_ms"],
                        s["communication_ms"]))
                j = os.path.join(args.out, "ddp_%s_%d.json" % (model, np_))  # B: DDP
                if os.path.exists(j):
                    os.remove(j)
                wall, _ = bl.mpirun(np_, [bl.TORCH_PYTHON, os.path.join(bl.ROOT, "bench", "ddp", "ddp_bench.py"),
                                          "--model", model_sync,
                                          "--backward-ms", "0,{0:.3f},{0:.3f}b".format(
                                              runs["syncgen"]["overlap"][-1]["compute_ms"]) if overlap else "0",
                                          "--steps", str(steps), "--warmup", str(warmup), "--bucket-cap-mb", "25",
                                          "--port", str(free_port()), "--json", j], timeout=600)
                d = json.load(open(j))
                for (name, _), reg in zip(ddp_regimes, d["regimes"]):
                    reg["wall_s"] = wall
                    runs["ddp"][name].append(reg)
                    bl.log("#   ddp     %-7s step p50 %8.2f ms, compute %8.2f, exposed %8.2f" % (
                        name, reg["step_p50_ms"], reg["compute_ms"], reg["exposed_communication_ms"]))
            for name, sgname in ddp_regimes:
                ms = dict(regimes)[sgname]
                row = {"model": model, "ranks": np_, "regime": name, "plan_backward_ms": ms, "steps": steps,
                       "warmup": warmup}
                for c in ("syncgen", "ddp"):
                    rs = runs[c][sgname if c == "syncgen" else name]
                    row[c] = {k: bl.median([x[k] for x in rs]) for k in
                              ("step_p50_ms", "step_mean_ms", "compute_ms", "exposed_communication_ms")}
                    if c == "syncgen":
                        row[c]["communication_ms"] = bl.median([x["communication_ms"] for x in rs])
                        row[c]["bucket_time_us"] = [bl.median([x["buckets"][i]["time_us"] for x in rs])
                                                    for i in range(len(rs[0]["buckets"]))]
                        row[c]["bucket_bytes"] = [b["bytes"] for b in rs[0]["buckets"]]
                    else:
                        row[c]["ddp_rebuilt_bucket_sizes"] = rs[-1].get("ddp_rebuilt_bucket_sizes")
                        row[c]["wrong_tensors"] = max(x["wrong_tensors"] for x in rs)
                    row[c]["rounds"] = rs
                row["ratio_step_p50"] = bl.ratio(row["syncgen"]["step_p50_ms"], row["ddp"]["step_p50_ms"])
                row["ratio_exposed"] = bl.ratio(row["syncgen"]["exposed_communication_ms"],
                                                row["ddp"]["exposed_communication_ms"])
                rec["results"].append(row)
    rec["load_average_at_end"] = bl.loadavg()
    path = bl.write_results(args.results, rec)

    bl.log("\n## syncgen DDP plan vs PyTorch DDP (gloo), medians of %d rounds; ratio = syncgen / DDP (< 1: syncgen faster)"
           % args.rounds)
    bl.log("| model | ranks | regime | syncgen step p50 (ms) | DDP step p50 (ms) | ratio | syncgen compute | DDP compute "
           "| syncgen exposed comm (ms) | DDP exposed comm (ms) | ratio |")
    bl.log("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rec["results"]:
        s, d = row["syncgen"], row["ddp"]
        bl.log("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["model"], row["ranks"], row["regime"] if row["regime"] == "sync" else "%s (backward %d ms)" % (
                row["regime"], row["plan_backward_ms"]), bl.fmt(s["step_p50_ms"]),
            bl.fmt(d["step_p50_ms"]), bl.fmt(row["ratio_step_p50"]), bl.fmt(s["compute_ms"]), bl.fmt(d["compute_ms"]),
            bl.fmt(s["exposed_communication_ms"]), bl.fmt(d["exposed_communication_ms"]),
            bl.fmt(row["ratio_exposed"])))
    bl.log("# results: %s" % os.path.relpath(path, bl.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
