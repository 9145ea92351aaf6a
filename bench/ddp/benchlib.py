"""benchlib: what the CPU benchmark drivers share (bench/ddp/compare.py, bench/plans/compare.py,
bench/compiler/compiler.py): mpirun flags, building and running generated programs, medians,
the machine description that goes into every results file.

Standard library only, so that it runs with any python3 (the DDP contender itself needs Debian's
python3-torch under /usr/bin/python3).
"""

import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNCGEN = os.path.join(ROOT, "bin", "syncgen")
OUT = os.environ.get("OUT") or os.path.join(ROOT, "bench", "out")
RESULTS = os.path.join(ROOT, "bench", "results")
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")


def log(msg):
    print(msg, flush=True)


def mpirun_args():
    """The same mpirun flags for every contender: MPIRUN_ARGS, else the ones this machine needs."""
    args = os.environ.get("MPIRUN_ARGS", "--oversubscribe --bind-to none").split()
    if os.geteuid() == 0 and "--allow-run-as-root" not in args:
        args.append("--allow-run-as-root")
    return args


def mpirun(np_, cmd, timeout=600, env=None):
    """Runs cmd under mpirun with np_ ranks; returns (wall seconds, stdout+stderr). Raises on failure."""
    full = ["mpirun"] + mpirun_args() + ["-np", str(np_)] + cmd
    t0 = time.perf_counter()
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM lets mpirun take its ranks down with it; SIGKILL would orphan them
        p.terminate()
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        raise RuntimeError("%s: no result after %d s, stopped\n%s" % (" ".join(full), timeout, (out or "")[-4000:]))
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(full), p.returncode, out[-4000:]))
    return wall, out


def build(plan, out):
    """syncgen build PLAN -o OUT (cached by content, so cheap when unchanged).

    With PREBUILT=DIR in the environment nothing is built: the program is DIR/basename(OUT), made
    beforehand on a machine with Go by the same script's --build-only (for machines without Go).
    """
    prebuilt = os.environ.get("PREBUILT")
    if prebuilt:
        prog = os.path.join(prebuilt, os.path.basename(out))
        if not os.access(prog, os.X_OK):
            sys.exit("bench: PREBUILT=%s has no program %s: build it where Go is with the same "
                     "script's --build-only and copy the folder along" % (prebuilt, os.path.basename(out)))
        return prog
    subprocess.run([SYNCGEN, "build", plan, "-o", out], check=True, stdout=subprocess.DEVNULL)
    return out


def run_program(prog, np_, steps, warmup, json_path, extra=(), timeout=600):
    """Runs a generated program on the CPU backend; returns its --json record."""
    if os.path.exists(json_path):
        os.remove(json_path)
    wall, _ = mpirun(np_, [prog, "--backend", "cpu", "--steps", str(steps), "--warmup", str(warmup),
                           "--check", "off", "--quiet", "--json", json_path] + list(extra), timeout=timeout)
    with open(json_path) as f:
        rec = json.load(f)
    rec["_wall_s"] = wall
    return rec


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def ratio(a, b):
    return a / b if a is not None and b else None


def _cmd(args):
    try:
        return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120).stdout.strip()
    except Exception:
        return ""


def torch_version():
    if not os.path.exists(TORCH_PYTHON):
        return None
    v = _cmd([TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"])
    return v.splitlines()[-1] if v and "Error" not in v else None


def machine():
    """Date, machine and versions: the header of every results file."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
            mem = "%.1f GiB" % (kb / 1024 / 1024)
    except Exception:
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1).strip() if m else ""
    except Exception:
        pass
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except Exception:
        load = []
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "load_average_at_start": load,
        "open_mpi": _cmd(["mpirun", "--version"]).splitlines()[0] if shutil.which("mpirun") else None,
        "go": _cmd(["go", "version"]),
        "syncgen": _cmd([SYNCGEN, "--version"]),
        "commit": _cmd(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
        "mpirun_args": " ".join(mpirun_args()),
        "python": sys.version.split()[0],
    }


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except Exception:
        return []


def write_results(name, rec):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    return path


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v
