#!/usr/bin/env python3
"""dump-params.py: a PyTorch module's parameters as JSON, for `syncgen import`.

    python3 scripts/dump-params.py MODULE:FACTORY [KWARGS_JSON] > params.json
    syncgen import params.json -o model.sync

MODULE:FACTORY names a callable that returns an nn.Module, e.g.
torchvision.models:resnet50, or mypackage.model:build with '{"layers": 48}' as
its keyword arguments. The module is built on PyTorch's meta device, so no
memory is allocated for its weights (a factory that does not support it is
built normally).

The JSON lists named_parameters() in registration order, which is the order
syncgen declares them in (the backward makes gradients ready in the reverse
order), with each one's dtype, shape and requires_grad (False: `frozen`),
and "tied": the groups of names that share one parameter (named_parameters()
lists each shared parameter once, under its first name).
"""
import importlib
import json
import sys


def fail(msg):
    """Says what went wrong on stderr, without a traceback; status 1."""
    sys.stderr.write("dump-params.py: " + msg + "\n")
    return 1


def main(argv):
    if len(argv) < 2 or ":" not in argv[1] or len(argv) > 3:
        sys.stderr.write(__doc__)
        return 2
    mod_name, _, attr = argv[1].partition(":")
    try:
        kwargs = json.loads(argv[2]) if len(argv) > 2 else {}
    except ValueError as e:
        return fail("KWARGS_JSON %r is not JSON: %s" % (argv[2], e))
    if not isinstance(kwargs, dict):
        return fail("KWARGS_JSON %r is not a JSON object of keyword arguments, such as '{\"layers\": 48}'" % argv[2])
    try:
        import torch  # imported here so that --help works without PyTorch
    except ImportError as e:
        return fail("needs PyTorch (%s): install it (pip install torch), or run this where it is" % e)

    try:
        module = importlib.import_module(mod_name)
    except ImportError as e:
        return fail("cannot import module %r (%s): put its package on PYTHONPATH, or install it" % (mod_name, e))
    factory = getattr(module, attr, None)
    if not callable(factory):
        return fail("module %r has no callable %r: MODULE:FACTORY names a function or class that returns an nn.Module" % (mod_name, attr))
    try:
        with torch.device("meta"):
            model = factory(**kwargs)
    except Exception:  # a factory that cannot build on the meta device
        model = factory(**kwargs)
    if not hasattr(model, "named_parameters"):
        return fail("%s returned %s, not an nn.Module" % (argv[1], type(model).__name__))
    params = [
        {"name": name, "dtype": str(p.dtype), "shape": list(p.shape), "requires_grad": bool(p.requires_grad)}
        for name, p in model.named_parameters()
    ]
    groups = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    tied = [names for names in groups.values() if len(names) > 1]
    json.dump({"format": "syncgen-params", "module": argv[1], "parameters": params, "tied": tied}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
