"""gen_many: writes a .sync program with N tensors (default 10,000), one declaration line each,
for timing the compiler on a big model (bench/compiler/compiler.py).

The model: N/10 transformer-like layers of 10 tensors (attention q/k/v/o weights and biases, an
MLP's two weights and a LayerNorm), hidden size 256, in f32 (about 1.9 GB of gradients at
N = 10,000; the program is compiled, never run, by the benchmark); a DDP-style bucket plan
(25 MiB cap, 1 MiB first, reverse) and an overlapped allreduce.

    python3 bench/compiler/gen_many.py [-n 10000] -o many.sync
"""

import argparse

LAYER = [
    ("attn.q.weight", "256, 256"), ("attn.q.bias", "256"),
    ("attn.k.weight", "256, 256"), ("attn.v.weight", "256, 256"),
    ("attn.o.weight", "256, 256"), ("attn.o.bias", "256"),
    ("mlp.fc1.weight", "1024, 256"), ("mlp.fc2.weight", "256, 1024"),
    ("ln.weight", "256"), ("ln.bias", "256"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("-o", required=True)
    args = ap.parse_args()
    lines = ["// %d tensors, one declaration each: written by bench/compiler/gen_many.py" % args.n, ""]
    i = 0
    layer = 0
    while i < args.n:
        for name, shape in LAYER:
            if i == args.n:
                break
            lines.append("tensor layers.%d.%s f32[%s]" % (layer, name, shape))
            i += 1
        layer += 1
    lines += [
        "",
        "stream compute",
        "stream comm priority high",
        "",
        "bucket grads { * } cap 25MiB first 1MiB order reverse",
        "",
        "step {",
        "    backward 100ms on compute",
        "    allreduce grads op avg on comm after ready",
        "    wait comm",
        "}",
        "",
    ]
    with open(args.o, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
