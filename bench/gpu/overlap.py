#!/usr/bin/env python3
"""overlap.py TRACE: show that a bucket's collective overlaps the simulated
backward pass in a syncgen Chrome trace (--trace FILE): some collective
span (cat "collective") starts while a backward pass (cat "compute", name
"backward") runs on another stream (tid) of the same rank (pid). Prints the first such pair and exits 0, or exits 1."""
import json
import sys

doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"] if isinstance(doc, dict) else doc
spans = [e for e in events if e.get("ph") == "X" and "ts" in e]


colls = [e for e in spans if e.get("cat") == "collective"]
work = [e for e in spans if e.get("cat") == "compute" and e.get("name") == "backward"]
print("trace: %d spans, %d collectives, %d backward passes" % (len(spans), len(colls), len(work)))
for c in sorted(colls, key=lambda e: e["ts"]):
    for w in work:
        if w["pid"] == c["pid"] and w["tid"] != c["tid"] and c["ts"] < w["ts"] + w.get("dur", 0) and c["ts"] >= w["ts"]:
            print("overlap: %r (tid %s) starts at %.1f us, inside %r (tid %s) %.1f..%.1f us"
                  % (c.get("name"), c["tid"], c["ts"], w.get("name"), w["tid"], w["ts"], w["ts"] + w.get("dur", 0)))
            sys.exit(0)
print("no collective starts while a backward span runs on another stream")
sys.exit(1)
