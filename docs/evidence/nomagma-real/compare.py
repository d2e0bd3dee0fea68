#!/usr/bin/env python3
"""Emulation vs reality: where the emulated nomagma run (docs/evidence/smoke.json, cuSOLVER forced on
the MAGMA installation) predicted the real nomagma run (docs/evidence/nomagma-real/smoke-copy.json,
the MAGMA-free library built by tools/build-lazy-variant), case by case, check by check, and for
timings. Prints the Markdown tables docs/smoke.md carries.

    python3 docs/evidence/nomagma-real/compare.py [EMULATED.json REAL.json]
"""
import json
import sys
from collections import Counter

here = __file__.rsplit("/", 1)[0]
emu_path = sys.argv[1] if len(sys.argv) > 2 else f"{here}/../smoke.json"
real_path = sys.argv[2] if len(sys.argv) > 2 else f"{here}/smoke-copy.json"
emu_rep, real_rep = json.load(open(emu_path)), json.load(open(real_path))


def variant(rep, name):
    return next(v for v in rep["variants"] if v["name"] == name)


emu, real = variant(emu_rep, "nomagma"), variant(real_rep, "nomagma")
assert emu["emulated"] and not real["emulated"], "first report must be the emulated run, second the real one"
emu_cases = {c["id"]: c for c in emu["cases"]}
real_cases = {c["id"]: c for c in real["cases"]}


def outcome(c):
    """What the op did, whatever the table expected: ran (within tolerance or not) or raised."""
    raw = c["raw"]
    if raw["outcome"] == "ok":
        return "ran"
    if raw["outcome"] == "error":
        return "raised " + (raw.get("error_type") or "error")
    return raw["outcome"]


rows = Counter()
differ = []
for cid, r in real_cases.items():
    pref = r["preference"]
    e = emu_cases.get(cid)
    if e is None:
        rows[(pref, "not run by the emulation", outcome(r))] += 1
        continue
    same = outcome(e) == outcome(r) and e["status"] == r["status"]
    rows[(pref, "predicted" if same else "NOT predicted", outcome(r))] += 1
    if not same:
        differ.append((cid, f"{e['status']} ({outcome(e)})", f"{r['status']} ({outcome(r)})"))

print(f"Cases of the nomagma variant: emulated run {len(emu_cases)}, real run {len(real_cases)}\n")
print("| preference | emulation | real outcome | cases |")
print("|---|---|---|---|")
for (pref, verdict, out), n in sorted(rows.items()):
    print(f"| {pref} | {verdict} | {out} | {n} |")
if differ:
    print("\nCases the emulation got wrong:\n\n| case | emulated | real |\n|---|---|---|")
    for d in differ:
        print("| " + " | ".join(d) + " |")

print("\n| check | emulated | real |\n|---|---|---|")
for name in ["laziness", "has_magma", "device_code", "identity"]:
    e = next((c["status"] for c in emu["checks"] if c["name"] == name), "not recorded (schema 1)")
    r = next((c["status"] for c in real["checks"] if c["name"] == name), "-")
    print(f"| {name} | {e} | {r} |")

# Timings: the emulated run timed the MAGMA installation; its cusolver column is the emulation's
# prediction of what nomagma users get by default.
emu_bench = emu_rep["bench"] if isinstance(emu_rep["bench"], list) else [emu_rep["bench"]]
emu_b = next(b for b in emu_bench if b["variant"] == "magma")
real_b = next(b for b in real_rep["bench"] if b["variant"] == "nomagma")
print("\n| op | size | emulated: magma install, cusolver (ms) | real nomagma, default (ms) | real / emulated |")
print("|---|---|---|---|---|")
for er in emu_b["rows"]:
    rr = next((x for x in real_b["rows"] if (x["op"], x["size"], x["dtype"]) == (er["op"], er["size"], er["dtype"])), None)
    pe = er["results"].get("cusolver", {}).get("median_ms")
    pr = rr and rr["results"].get("default", {}).get("median_ms")
    ratio = f"{pr / pe:.2f}×" if pe and pr else "-"
    print(f"| {er['op']} | {er['size']} {er['dtype']} | {pe if pe is None else f'{pe:.3f}'} | {pr if pr is None else f'{pr:.3f}'} | {ratio} |")
