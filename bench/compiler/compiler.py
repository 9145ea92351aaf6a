"""Comparison 4: the compiler itself. Wall time of

  syncgen gen   PLAN -o DIR      parse, check, generate, write the Go source
  syncgen build PLAN -o PROG     cold: an empty $SYNCGEN_CACHE (the Go build cache warm, as after
                                 any earlier build on the machine: the runtime package compiled);
                                 cached: the same plan again (the binary comes from the cache);
                                 with --cold-gocache also a first build ever: an empty GOCACHE too

for examples/resnet50.sync (161 tensors) and a generated 10,000-tensor program
(bench/compiler/gen_many.py, one declaration line per tensor). With hyperfine on PATH it does the
timing (--prepare empties the caches); otherwise each command runs RUNS times and the median is
taken. Also records the size of the generated source, to show it grows with the tensors as a table.

    python3 bench/compiler/compiler.py [--runs 5] [--cold-gocache]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddp"))
import benchlib as bl  # noqa: E402


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def timed(cmd, runs, prepare=None, env=None):
    """Seconds of each run of cmd (a list); prepare (a list) runs untimed before each one."""
    if shutil.which("hyperfine"):
        j = os.path.join(bl.OUT, "compiler", "hyperfine.json")
        hcmd = ["hyperfine", "-N" if prepare is None else "--shell=sh", "--runs", str(runs), "--export-json", j,
                "--style", "none"]
        if prepare is not None:
            hcmd += ["--prepare", " ".join(sh_quote(a) for a in prepare)]
        hcmd.append(" ".join(sh_quote(a) for a in cmd))
        subprocess.run(hcmd, check=True, env=env, stdout=subprocess.DEVNULL)
        return json.load(open(j))["results"][0]["times"], "hyperfine"
    times = []
    for _ in range(runs):
        if prepare is not None:
            subprocess.run(prepare, check=True, env=env)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times, "repeated runs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build-runs", type=int, default=3, help="runs of the cold builds")
    ap.add_argument("--cold-gocache", action="store_true", help="also time one build with an empty Go build cache")
    ap.add_argument("--tensors", type=int, default=10000)
    ap.add_argument("--results", default="compiler.json")
    args = ap.parse_args()
    out = os.path.join(bl.OUT, "compiler")
    os.makedirs(out, exist_ok=True)
    many = os.path.join(out, "many%d.sync" % args.tensors)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen_many.py"),
                    "-n", str(args.tensors), "-o", many], check=True)
    plans = [("resnet50", os.path.join(bl.ROOT, "examples", "resnet50.sync")),
             ("many%d" % args.tensors, many)]
    cache = os.path.join(out, "cache")
    env = dict(os.environ, SYNCGEN_CACHE=cache)
    rec = {"comparison": "compiler", "machine": bl.machine(), "runs": args.runs, "build_runs": args.build_runs,
           "results": []}
    rm_cache = ["rm", "-rf", cache]
    for name, src in plans:
        rel = os.path.relpath(src, bl.ROOT)
        gdir = os.path.join(out, name + "_gen")
        prog = os.path.join(out, name + "_sync")
        # warm the Go build cache (the runtime package) and the page cache
        subprocess.run([bl.SYNCGEN, "build", src, "-o", prog], check=True, env=env, stdout=subprocess.DEVNULL)
        cases = [
            ("gen", [bl.SYNCGEN, "gen", src, "-o", gdir], None, args.runs, "syncgen gen %s -o DIR" % rel),
            ("build cold", [bl.SYNCGEN, "build", src, "-o", prog], rm_cache, args.build_runs,
             "rm -rf $SYNCGEN_CACHE; syncgen build %s -o PROG" % rel),
            ("build cached", [bl.SYNCGEN, "build", src, "-o", prog], None, args.runs,
             "syncgen build %s -o PROG  (second run)" % rel),
        ]
        for case, cmd, prep, runs, shown in cases:
            ts, how = timed(cmd, runs, prep, env)
            row = {"program": name, "source": rel, "case": case, "median_s": bl.median(ts), "times_s": ts,
                   "method": how, "command": shown}
            rec["results"].append(row)
            bl.log("# %-10s %-13s median %.3f s over %d runs (%s)" % (name, case, row["median_s"], len(ts), how))
        if args.cold_gocache:
            gocache = os.path.join(out, "gocache")
            shutil.rmtree(gocache, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run([bl.SYNCGEN, "build", src, "-o", prog], check=True, env=dict(env, GOCACHE=gocache),
                           stdout=subprocess.DEVNULL)
            t = time.perf_counter() - t0
            shutil.rmtree(gocache, ignore_errors=True)
            rec["results"].append({"program": name, "source": rel, "case": "build cold, empty Go cache",
                                   "median_s": t, "times_s": [t], "method": "one run",
                                   "command": "GOCACHE=EMPTY syncgen build %s -o PROG (empty $SYNCGEN_CACHE)" % rel})
            bl.log("# %-10s %-13s %.3f s (one run, empty GOCACHE)" % (name, "build first", t))
        gen_main = os.path.join(gdir, "main.go")
        src_lines = sum(1 for _ in open(gen_main))
        rec.setdefault("generated", []).append({
            "program": name, "tensors": sum(1 for ln in open(src) if ln.startswith("tensor")) or None,
            "main_go_bytes": os.path.getsize(gen_main), "main_go_lines": src_lines,
            "binary_bytes": os.path.getsize(prog)})
    rec["load_average_at_end"] = bl.loadavg()
    path = bl.write_results(args.results, rec)
    bl.log("\n## the compiler (wall time, medians)")
    bl.log("| program | gen (s) | build cold (s) | build cached (s) | generated main.go | binary |")
    bl.log("|---|---|---|---|---|---|")
    for g in rec["generated"]:
        by = {r["case"]: r["median_s"] for r in rec["results"] if r["program"] == g["program"]}
        bl.log("| %s | %.3f | %.2f | %.3f | %d lines, %.0f KiB | %.1f MiB |" % (
            g["program"], by["gen"], by["build cold"], by["build cached"], g["main_go_lines"],
            g["main_go_bytes"] / 1024, g["binary_bytes"] / 1048576))
    bl.log("# results: %s" % os.path.relpath(path, bl.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
