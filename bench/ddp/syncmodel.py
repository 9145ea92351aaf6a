"""syncmodel: the parameter tensors of a .sync program, for the PyTorch side of the benchmarks.

Reads `tensor NAME DTYPE[DIMS] [frozen]` declarations, following `import "..."` (the embedded
standard library under stdlib/, or a path relative to the importing file), expanding brace ranges
(`h.{0..47}.mlp.weight`, several ranges multiply, the leftmost slowest) and skipping `//` and
`/* */` comments. Only what the benchmarks need: tensors in declaration order; no checking beyond
that (`syncgen check` is the checker).

    python3 bench/ddp/syncmodel.py stdlib/models/resnet50.sync     # prints count, parameters, bytes
"""

import itertools
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STDLIB = os.path.join(ROOT, "stdlib")

DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1}

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s\[\],;{}"]*(?:\{\d+\.\.\d+\}[^\s\[\],;{}"]*)+|[^\s\[\],;{}"]+|[\[\],;{}]')


def _strip_comments(text):
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def expand(name):
    """Brace ranges of a bare name: a.{0..1}.b{2..3} -> a.0.b2 a.0.b3 a.1.b2 a.1.b3."""
    if name.startswith('"'):
        return [bytes(name[1:-1], "utf-8").decode("unicode_escape")]
    parts = re.split(r"\{(\d+)\.\.(\d+)\}", name)
    if len(parts) == 1:
        return [name]
    fixed = parts[0::3]
    ranges = [range(int(a), int(b) + 1) for a, b in zip(parts[1::3], parts[2::3])]
    names = []
    for combo in itertools.product(*ranges):
        s = fixed[0]
        for v, f in zip(combo, fixed[1:]):
            s += str(v) + f
        names.append(s)
    return names


def _resolve(path, base_dir):
    cands = [os.path.join(base_dir, path), os.path.join(STDLIB, path)]
    out = []
    for c in cands:
        out += [c, c + ".sync"]
    for c in out:
        if os.path.isfile(c):
            return os.path.abspath(c)
    raise FileNotFoundError("import %r from %s: not found (looked in %s)" % (path, base_dir, ", ".join(out)))


def tensors(path, _seen=None):
    """[(name, dtype, shape tuple, frozen)] in declaration order, imports at their point."""
    seen = set() if _seen is None else _seen
    path = os.path.abspath(path)
    if path in seen:
        return []
    seen.add(path)
    with open(path, encoding="utf-8") as f:
        toks = _TOKEN.findall(_strip_comments(f.read()))
    out, i = [], 0
    while i < len(toks):
        t = toks[i]
        if t == "import" and i + 1 < len(toks):
            out += tensors(_resolve(toks[i + 1].strip('"'), os.path.dirname(path)), seen)
            i += 2
        elif t == "tensor" and i + 2 < len(toks) and toks[i + 2] in DTYPE_BYTES and toks[i + 3] == "[":
            name, dtype = toks[i + 1], toks[i + 2]
            j = i + 4
            dims = []
            while toks[j] != "]":
                if toks[j] != ",":
                    dims.append(int(toks[j]))
                j += 1
            j += 1
            frozen = j < len(toks) and toks[j] == "frozen"
            if frozen:
                j += 1
            for n in expand(name):
                out.append((n, dtype, tuple(dims), frozen))
            i = j
        else:
            i += 1
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


if __name__ == "__main__":
    for p in sys.argv[1:]:
        ts = tensors(p)
        params = sum(numel(s) for _, _, s, fr in ts if not fr)
        nbytes = sum(numel(s) * DTYPE_BYTES[d] for _, d, s, fr in ts if not fr)
        print("%s: %d tensors (%d with gradients), %d parameters, %d bytes"
              % (p, len(ts), sum(1 for t in ts if not t[3]), params, nbytes))
