"""ddp_bench: PyTorch DistributedDataParallel (gloo) on the parameter shapes of a .sync model,
with the backward pass replaced by a simulated one of a given duration: the contender of
syncgen's DDP plan in bench/ddp/compare.py.

Run under mpirun, one process per rank (ranks and world size from Open MPI's environment):

    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        /usr/bin/python3 bench/ddp/ddp_bench.py --model stdlib/models/resnet50.sync \
        --backward-ms 0,60 --steps 20 --warmup 3 --json out.json

What a step does, mirroring a syncgen step (`backward D on compute; allreduce ... after ready;
wait comm`):
- the module's parameters have exactly the model's shapes, registered in declaration order; DDP
  (bucket_cap_mb, 1 MiB first bucket) runs its first iteration with one bucket and then rebuilds
  its buckets in the order the gradients became ready: reverse declaration order, as syncgen's;
- forward chains one autograd function per parameter. Its backward waits until the parameter's
  share of D (in proportion to its size, cumulated in reverse declaration order, as syncgen's
  `backward` shares it) has elapsed since the backward started, sleeping, or with a `b` suffix
  on the duration (`60b`) spinning, so that a core stays busy as in a real backward and as in
  syncgen's CPU backend, which fills the gradients meanwhile; then it returns the gradient.
  DDP's hook on the parameter's AccumulateGrad marks it ready and starts each bucket's allreduce
  (gloo, asynchronous) as soon as the bucket is complete; the end of backward waits for them:
  the same overlap of readiness and communication that syncgen simulates;
- gradients (--grads): `view` (default) is DDP with gradient_as_bucket_view=True, the closest
  twin of syncgen's in-place buckets: the gradients are views into DDP's buckets, each step
  accumulates the returned gradient (a view of one preallocated buffer of rank+1) in place into
  them, zero_grad(set_to_none=False) between steps; `fresh` is DDP's defaults: a newly
  allocated gradient per tensor and step, copied into the buckets and back (more memory and page
  faults: 4 GB a rank for bert_large);
- every step starts with a barrier (as syncgen's do) and times loss.backward() only (the
  forward's Python overhead is not part of the synchronisation); the step time is the maximum
  over ranks; compute is the time until the last simulated gradient was returned (mean over
  ranks and steps); exposed communication = mean step time - compute, as syncgen's report
  defines it.
The averaged gradients are checked after each regime (the average of rank+1 over the ranks is
(size+1)/2 exactly); a wrong one makes the exit status 1.
"""

import argparse
import json
import os
import platform
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import syncmodel  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help=".sync file whose tensors are the parameters")
    ap.add_argument("--backward-ms", default="60",
                    help="comma-separated simulated backward durations, one regime each; "
                         "a trailing b (60b) spins instead of sleeping")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bucket-cap-mb", type=float, default=25)
    ap.add_argument("--grads", choices=("view", "fresh"), default="view",
                    help="view (default): gradient_as_bucket_view=True, gradients accumulated in place into "
                         "DDP's buckets from one preallocated source, zero_grad(set_to_none=False) between steps; "
                         "fresh: DDP's defaults, a newly allocated gradient per tensor and step, copied into "
                         "the buckets and back")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--json", help="write the figures here (rank 0)")
    args = ap.parse_args()

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    # one intra-op thread per rank unless OMP_NUM_THREADS says otherwise, as torchrun sets it for
    # several processes per host
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=size)

    decl = [t for t in syncmodel.tensors(args.model) if not t[3]]
    dtypes = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
    nbytes = [syncmodel.numel(s) * syncmodel.DTYPE_BYTES[d] for _, d, s, _ in decl]

    class Clock:
        """Deadlines of the simulated backward: gradient i is due at t0 + due[i]."""

        def __init__(self):
            self.t0 = 0.0
            self.due = [0.0] * len(decl)
            self.last = 0.0
            self.value = float(rank + 1)
            self.burn = False

        def set_duration(self, seconds):
            total = float(sum(nbytes))
            acc = 0.0
            for i in reversed(range(len(decl))):  # reverse declaration order
                acc += nbytes[i] / total * seconds
                self.due[i] = acc

    clock = Clock()

    class SimGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, p, i):
            ctx.i = i
            ctx.shape = p.shape
            ctx.dtype = p.dtype
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            due = clock.t0 + clock.due[ctx.i]
            if clock.burn:  # keep a core busy until the gradient is due, as a real backward would
                while time.perf_counter() < due:
                    pass
            else:
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            if args.grads == "view":
                n = syncmodel.numel(ctx.shape)
                grad = source[ctx.dtype][:n].view(ctx.shape)
            else:
                grad = torch.full(ctx.shape, clock.value, dtype=ctx.dtype)
            clock.last = time.perf_counter()
            return g, grad, None

    class Shapes(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterList(
                [nn.Parameter(torch.zeros(s, dtype=dtypes[d])) for _, d, s, _ in decl])

        def forward(self, x):
            for i, p in enumerate(self.params):
                x = SimGrad.apply(x, p, i)
            return x

    # the gradients' values: one buffer per dtype, as large as the largest tensor, filled once
    source = {}
    for _, d, shp, _ in decl:
        n = syncmodel.numel(shp)
        if dtypes[d] not in source or source[dtypes[d]].numel() < n:
            source[dtypes[d]] = torch.full((n,), clock.value, dtype=dtypes[d])
    model = nn.parallel.DistributedDataParallel(
        Shapes(), bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=args.grads == "view")
    x = torch.zeros((), requires_grad=True)

    regimes = []
    for spec in [v for v in args.backward_ms.split(",") if v]:
        clock.burn = spec.endswith("b")
        ms = float(spec.rstrip("b"))
        clock.set_duration(ms / 1000.0)
        steps, computes = [], []
        for s in range(args.warmup + args.steps):
            model.zero_grad(set_to_none=args.grads == "fresh")
            out = model(x)
            dist.barrier()
            t0 = time.perf_counter()
            clock.t0 = t0
            out.backward()
            t1 = time.perf_counter()
            if s >= args.warmup:
                steps.append(t1 - t0)
                computes.append(clock.last - t0)
        want = (size + 1) / 2.0
        wrong = 0
        for p in model.module.params:
            if p.grad is None or not bool((p.grad == want).all()):
                wrong += 1
        st = torch.tensor(steps, dtype=torch.float64)
        dist.all_reduce(st, op=dist.ReduceOp.MAX)  # each step's maximum over ranks
        ct = torch.tensor(computes, dtype=torch.float64)
        dist.all_reduce(ct, op=dist.ReduceOp.SUM)
        wt = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(wt)
        step_ms = [v * 1e3 for v in st.tolist()]
        compute_ms = float(ct.mean()) / size * 1e3
        srt = sorted(step_ms)
        mean = sum(step_ms) / len(step_ms)
        reg = {
            "backward_ms": ms,
            "backward": "busy" if clock.burn else "sleep",
            "step_ms": step_ms,
            "step_p50_ms": srt[len(srt) // 2] if len(srt) % 2 else (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2,
            "step_mean_ms": mean,
            "compute_ms": compute_ms,
            "exposed_communication_ms": mean - compute_ms,
            "wrong_tensors": int(wt.item()),
        }
        try:
            ld = model._get_ddp_logging_data()
            # the buckets DDP actually used: the first iteration runs with one bucket, then DDP
            # rebuilds them in gradient-ready order with the 1 MiB first cap and bucket_cap_mb
            for k in ("bucket_sizes", "rebuilt_bucket_sizes"):
                if k in ld:
                    reg["ddp_" + k] = [int(v) for v in str(ld[k]).replace(" ", "").split(",") if v]
        except Exception as e:  # private API: only informative
            reg["ddp_logging_error"] = str(e)
        regimes.append(reg)
        if rank == 0:
            print("# ddp %s np=%d backward %gms%s: step p50 %.2f ms mean %.2f ms, compute %.2f ms, exposed %.2f ms, wrong %d"
                  % (os.path.basename(args.model), size, ms, " busy" if clock.burn else "", reg["step_p50_ms"], mean, compute_ms,
                     reg["exposed_communication_ms"], reg["wrong_tensors"]), flush=True)

    if rank == 0 and args.json:
        rec = {
            "contender": "pytorch-ddp-gloo",
            "model": args.model,
            "ranks": size,
            "tensors": len(decl),
            "parameters": sum(syncmodel.numel(s) for _, _, s, _ in decl),
            "gradient_bytes": sum(nbytes),
            "bucket_cap_mb": args.bucket_cap_mb,
            "grads": args.grads,
            "gradient_as_bucket_view": args.grads == "view",
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "steps": args.steps,
            "warmup": args.warmup,
            "regimes": regimes,
        }
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    bad = sum(r["wrong_tensors"] for r in regimes)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
