#!/usr/bin/env python3
"""compare.py BENCH: put the C baseline's and the runtime's allreduce tables
(bench/gpu/nccl_allreduce.c and TestGPUBench, same format) side by side.

overhead is the runtime's time per call over the C program's (host wall
clock per call, which is what small collectives cost); busbw_ratio the
runtime's bus bandwidth over C's (1.00 = equal; 0 ranks of traffic on one
GPU give no bus bandwidth at all)."""
import sys


def tables(path):
    out, cur = {}, None
    for line in open(path):
        if line.startswith("# C ncclAllReduce"):
            cur = out.setdefault("c", {})
            out["c_head"] = line
        elif line.startswith("# syncgen runtime allreduce"):
            cur = out.setdefault("go", {})
            out["go_head"] = line
        elif line.startswith("program "):
            f = line.split()
            out.setdefault("prog", {})[int(f[1])] = float(f[3])
            continue
        elif line.startswith("#") or not line.strip():
            continue
        elif cur is not None:
            f = line.split()
            if len(f) == 6 and f[0].isdigit():
                cur[int(f[0])] = [float(x) for x in f[1:]]
    return out


t = tables(sys.argv[1])
c, g = t.get("c", {}), t.get("go", {})
if not c or not g:
    sys.exit("compare.py: missing the C or the runtime table")
nccl = [h.split("NCCL ")[1].split(",")[0] for h in (t["c_head"], t["go_head"])]
if nccl[0] != nccl[1]:
    sys.exit("compare.py: the C baseline ran NCCL %s, the runtime NCCL %s: not comparable" % tuple(nccl))
print("# side by side: host us per call (C, runtime, ratio), device us per call (C, runtime), busbw GB/s (C, runtime)")
print("%-12s %9s %9s %7s %9s %9s %8s %8s" % ("bytes", "C_us", "rt_us", "ratio", "C_dev", "rt_dev", "C_bus", "rt_bus"))
worst_small, worst_large = 0.0, 0.0
for size in sorted(set(c) & set(g)):
    ci, gi = c[size], g[size]
    ratio = gi[1] / ci[1] if ci[1] else float("nan")
    if size <= 1 << 20:
        worst_small = max(worst_small, ratio)
    else:
        worst_large = max(worst_large, ratio)
    print("%-12d %9.2f %9.2f %7.3f %9.2f %9.2f %8.2f %8.2f" % (size, ci[1], gi[1], ratio, ci[2], gi[2], ci[4], gi[4]))
print("# worst runtime/C time ratio: %.3f up to 1 MiB, %.3f above" % (worst_small, worst_large))
prog = t.get("prog", {})
if prog:
    print("# through a generated program (rtbench, step time / K), us per allreduce, against C's host us per call")
    print("%-12s %9s %9s %7s" % ("bytes", "C_us", "prog_us", "ratio"))
    for size in sorted(prog):
        if size in c:
            print("%-12d %9.2f %9.2f %7.2f" % (size, c[size][1], prog[size], prog[size] / c[size][1]))
