"""Run a switch spec that `splitpkg env` printed, with py-rattler (PyPI) as the installer: the
spec string exactly as printed, parsed by rattler's MatchSpec (conda's `NAME=VERSION=BUILD` form
leniently, as conda and mamba read it; pixi's bracket form strictly), solved against a file://
channel with the prefix's packages as the installed ones, and the transaction applied to the prefix.

Usage: conda_switch.py PREFIX CHANNEL_DIR SPEC (conda|pixi)

What the user asked for stays asked for, as `conda install` keeps the history's specs: the prefix's
top-level packages (those no other installed package depends on), the lazy package's own spec
replaced by the printed one; everything else installed is locked (preferred as it is) but may go,
as a dependency the new build no longer needs (libmagma, which the slim build constrains away).
Prints one JSON document: {"solved": [[name, version, build], ...]} or {"unsolvable": message}.
"""
import asyncio
import json
import os
import pathlib
import sys

import rattler
from rattler.exceptions import SolverError


def installed(prefix):
    return [rattler.PrefixRecord.from_path(p) for p in sorted((prefix / "conda-meta").glob("*.json"))]


def top_level(records, lazy):
    needed = set()
    for r in records:
        for d in r.depends:
            needed.add(d.split()[0])
    return [r.name.normalized for r in records if r.name.normalized not in needed and r.name.normalized != lazy]


async def main():
    prefix, channel, spec, form = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    printed = rattler.MatchSpec(spec, strict=(form == "pixi"))
    lazy = printed.name.normalized
    records = installed(prefix)
    specs = [printed] + [rattler.MatchSpec(n) for n in top_level(records, lazy)]
    try:
        solved = await rattler.solve(
            sources=[channel.resolve().as_uri()],
            specs=specs,
            platforms=["linux-64", "noarch"],
            locked_packages=records,
            virtual_packages=[],
        )
    except SolverError as e:
        print(json.dumps({"unsolvable": str(e)}))
        return
    await rattler.install(
        solved,
        target_prefix=prefix,
        cache_dir=prefix.parent / ".conda-switch-pkgs",
        installed_packages=records,
        show_progress=False,
    )
    print(json.dumps({"solved": sorted([r.name.normalized, str(r.version), str(r.build)] for r in solved)}))


asyncio.run(main())
# As solve_check.py: leave without the interpreter's finalization (py-rattler's runtime threads).
sys.stdout.flush()
os._exit(0)
