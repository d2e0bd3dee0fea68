"""Solve the `splitpkg solve` scenarios again with py-rattler (PyPI), as an independent check.

Usage: solve_check.py SCENARIOS.json

SCENARIOS.json is a list of {"id", "channel" (a directory), "specs", "virtual_packages"
(["__cuda=13.0", ...])}. Prints one JSON document: for each id either {"solved": [[name, version,
build], ...]} (sorted by name) or {"unsolvable": "<solver message>"}.
"""
import asyncio
import json
import os
import pathlib
import sys

import rattler
from rattler.exceptions import SolverError


async def solve_one(s):
    channel = pathlib.Path(s["channel"]).resolve().as_uri()
    virtual = []
    for v in s["virtual_packages"]:
        name, version = v.split("=", 1)
        virtual.append(rattler.GenericVirtualPackage(rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0")))
    try:
        records = await rattler.solve(
            sources=[channel],
            specs=s["specs"],
            platforms=["linux-64", "noarch"],
            virtual_packages=virtual,
        )
    except SolverError as e:
        return {"unsolvable": str(e)}
    solved = sorted([r.name.normalized, str(r.version), str(r.build)] for r in records)
    return {"solved": solved}


async def main():
    scenarios = json.loads(pathlib.Path(sys.argv[1]).read_text())
    out = {"rattler_version": getattr(rattler, "__version__", "unknown"), "results": {}}
    for s in scenarios:
        out["results"][s["id"]] = await solve_one(s)
    print(json.dumps(out, indent=1, sort_keys=True))


asyncio.run(main())
# The result is written; leave without the interpreter's finalization, where py-rattler's runtime
# threads can still be releasing the GIL ("Fatal Python error: PyGILState_Release ... finalizing",
# once in four runs here, 2026-12-03), which would fail a solve that succeeded.
sys.stdout.flush()
os._exit(0)
