"""tables: bench/results/*.json as the Markdown tables of docs/performance.md's CPU section.

    python3 bench/ddp/tables.py [RESULTS_DIR]

Prints one table per results file found (allreduce.json, ddp.json or ddp_full.json, plans.json,
compiler.json), with the date, commit, load and commands each came from, for pasting into the doc.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def head(rec, what):
    m = rec["machine"]
    print("\n<!-- %s: %s, commit %s, load average at start %s, at end %s -->" % (
        what, m["date"], m.get("commit") or "?", " ".join(m.get("load_average_at_start", [])),
        " ".join(rec.get("load_average_at_end", []))))
    cmds = rec.get("commands") or rec.get("command") or {}
    if isinstance(cmds, str):
        cmds = {"": cmds}
    for name, cmd in cmds.items():
        print("<!-- %s%s -->" % (name + ": " if name else "", cmd))


def allreduce(rec):
    head(rec, "allreduce.json")
    print("| ranks | bytes | MPI_Allreduce busbw (GB/s) | generated program busbw (GB/s) | ratio | from medians"
          " | per round | plain Go calling MPI_Allreduce (GB/s) | program / plain Go"
          " | C with the runtime's MPI settings (GB/s) | program / that |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    opt = lambda r, k, f: f % r[k] if k in r else ""  # files from before these columns lack them
    for r in rec["results"]:
        ratio = ("**%.2f**" if r["ratio"] >= 0.95 else "%.2f") % r["ratio"]
        print("| %d | %s | %.3f | %.3f | %s | %s | %s | %s | %s | %s | %s |" % (
            r["ranks"], size(r["bytes"]), r["mpi_busbw_gbs"], r["syncgen_busbw_gbs"], ratio,
            opt(r, "median_ratio", "%.2f"), opt(r, "per_round_ratio", "%.2f"),
            opt(r, "plain_go_busbw_gbs", "%.3f"), opt(r, "syncgen_over_plain_go", "%.2f"),
            opt(r, "mpi_runtime_settings_busbw_gbs", "%.3f"), opt(r, "syncgen_over_mpi_runtime_settings", "%.2f")))


def size(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def ddp(rec, name):
    head(rec, name)
    print("| model | ranks | regime | syncgen step p50 (ms) | DDP step p50 (ms) | step ratio | compute (ms) syncgen / DDP "
          "| syncgen exposed comm. (ms) | DDP exposed comm. (ms) | exposed ratio |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rec["results"]:
        s, d = r["syncgen"], r["ddp"]
        regime = r["regime"] if r["regime"] == "sync" else "%s (plan: backward %d ms)" % (r["regime"],
                                                                                         r["plan_backward_ms"])
        print("| %s | %d | %s | %s | %s | **%s** | %s / %s | %s | %s | **%s** |" % (
            r["model"], r["ranks"], regime, bl.fmt(s["step_p50_ms"], "%.1f"), bl.fmt(d["step_p50_ms"], "%.1f"),
            bl.fmt(r["ratio_step_p50"]), bl.fmt(s["compute_ms"], "%.0f"), bl.fmt(d["compute_ms"], "%.0f"),
            bl.fmt(s["exposed_communication_ms"], "%.1f"), bl.fmt(d["exposed_communication_ms"], "%.1f"),
            bl.fmt(r["ratio_exposed"])))


def plans(rec):
    head(rec, "plans.json")
    print("| model | ranks | plan | buckets | step p50 (ms) | vs DDP's plan | compute (ms) | exposed comm. (ms) "
          "| vs DDP's plan | comm. (ms) |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for x in rec["results"]:
        print("| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            x["model"], x["ranks"], x["plan"], x["buckets"], bl.fmt(x["step_p50_ms"], "%.1f"),
            bl.fmt(x.get("step_vs_ddp")), bl.fmt(x["compute_ms"], "%.0f"),
            bl.fmt(x["exposed_communication_ms"], "%.1f"), bl.fmt(x.get("exposed_vs_ddp")),
            bl.fmt(x["communication_ms"], "%.0f")))


def compiler(rec):
    head(rec, "compiler.json")
    cases = []
    for r in rec["results"]:
        if r["case"] not in cases:
            cases.append(r["case"])
    print("| program | " + " | ".join("%s (s)" % c for c in cases) + " | generated main.go | binary |")
    print("| --- | " + " | ".join("---:" for _ in cases) + " | ---: | ---: |")
    for g in rec["generated"]:
        by = {r["case"]: r["median_s"] for r in rec["results"] if r["program"] == g["program"]}
        print("| %s | %s | %d lines, %.0f KiB | %.1f MiB |" % (
            g["program"], " | ".join(bl.fmt(by.get(c), "%.3f") for c in cases), g["main_go_lines"],
            g["main_go_bytes"] / 1024, g["binary_bytes"] / 1048576))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else bl.RESULTS
    r = load(d, "allreduce.json")
    if r:
        allreduce(r)
    for name in ("ddp.json", "ddp_full.json"):
        r = load(d, name)
        if r:
            ddp(r, name)
    r = load(d, "plans.json")
    if r:
        plans(r)
    r = load(d, "compiler.json")
    if r:
        compiler(r)


if __name__ == "__main__":
    main()
