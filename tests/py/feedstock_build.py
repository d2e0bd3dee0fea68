"""Build a feedstock patched by `splitpkg feedstock` with real rattler-build (py-rattler-build),
offline, then solve and install it with py-rattler.

Usage: feedstock_build.py FEEDSTOCK_DIR MAGMA_SRC_DIR WORK_DIR SPLITPKG_BIN BUILD_LAZY_VARIANT CI_CONFIG VARIANT_KEY

1. A file:// channel gets the packages the recipe needs: `libmagma` and `libmagma-devel` (a real
   gcc-built libmagma-like library; the devel package run-exports `libmagma`), and `splitpkg`
   (the already-built binary and tools/build-lazy-variant as `splitpkg-build-lazy-variant`,
   packaged as they are; nothing is compiled again).
2. The feedstock's recipe is built for CI_CONFIG plus VARIANT_KEY with the values its
   conda_build_config.yaml lists (what `conda smithy rerender` writes into .ci_support), every
   variant, with the recipe's tests run natively.
3. Scenarios are solved over the channel (a plain install, the slim variant, slim + libmagma) and
   the two environments installed under WORK_DIR/envs.

Prints one JSON document (last line): packages from repodata.json with their files, the solved
scenarios, the environments' paths and the build log lines of the contract check.
"""
import asyncio
import io
import contextlib
import json
import os
import pathlib
import shutil
import sys

import splitpkg_package

import rattler
import rattler_build as rb
from rattler.exceptions import SolverError

feedstock, magma_src, work, splitpkg_bin, blv, ci_config, key = sys.argv[1:8]
feedstock, magma_src, work = pathlib.Path(feedstock), pathlib.Path(magma_src), pathlib.Path(work)
channel = work / "channel"
channel.mkdir(parents=True, exist_ok=True)
tools = rb.ToolConfiguration(test_strategy="native")


def build(recipe: pathlib.Path, variant_files=()):
    r = rb.Stage0Recipe.from_file(str(recipe))
    vc = rb.VariantConfig.from_files([str(v) for v in variant_files]) if variant_files else None
    return r.run_build(variant_config=vc, tool_config=tools, output_dir=str(channel),
                       channels=[channel.resolve().as_uri()], no_build_id=True)


helpers = work / "helpers"
# 1. libmagma / libmagma-devel, compiled here from the fixture's sources.
m = helpers / "magma"
shutil.copytree(magma_src, m / "src", dirs_exist_ok=True)
(m / "recipe.yaml").write_text("""schema_version: 1
context:
  version: "2.10.0"
recipe:
  name: magma-split
  version: ${{ version }}
source:
  - path: src
outputs:
  - package:
      name: libmagma
    build:
      script:
        - mkdir -p "$PREFIX/lib"
        - gcc -O1 -fPIC -shared -Wl,-soname,libmagma.so.2 -o "$PREFIX/lib/libmagma.so.2.10.0" magma.c
        - ln -s libmagma.so.2.10.0 "$PREFIX/lib/libmagma.so.2"
    requirements:
      run_exports:
        - ${{ pin_subpackage("libmagma", upper_bound="x.x") }}
  - package:
      name: libmagma-devel
    build:
      script:
        - mkdir -p "$PREFIX/include" "$PREFIX/lib"
        - cp magma_v2.h "$PREFIX/include/"
        - ln -s libmagma.so.2 "$PREFIX/lib/libmagma.so"
    requirements:
      run:
        - ${{ pin_subpackage("libmagma", exact=True) }}
      run_exports:
        - ${{ pin_subpackage("libmagma", upper_bound="x.x") }}
""")
build(m / "recipe.yaml")
# 1b. splitpkg, packaged from the binary already built (no compile).
build(splitpkg_package.stage(helpers / "splitpkg", {"splitpkg": splitpkg_bin, "splitpkg-build-lazy-variant": blv}))

# 2. The patched feedstock, both variants in one build call (one CI job).
values = []
lines = (feedstock / "recipe" / "conda_build_config.yaml").read_text().splitlines()
if f"{key}:" in lines:
    for line in lines[lines.index(f"{key}:") + 1:]:
        if not line.startswith("  - "):
            break
        values.append(line[4:].strip())
if not values:
    sys.exit(f"{feedstock}/recipe/conda_build_config.yaml lists no {key}")
extra = work / "variant-key.yaml"
extra.write_text(f"{key}:\n" + "".join(f"  - {v}\n" for v in values))
log = io.StringIO()
# keep_build: the work directories stay, with the verify-variant report each lazy build wrote.
tools = rb.ToolConfiguration(test_strategy="native", keep_build=True)
with contextlib.redirect_stdout(log):
    results = build(feedstock / "recipe" / "recipe.yaml", [feedstock / ".ci_support" / ci_config, extra])
reports = {}
for f in sorted((channel / "bld").glob("*/work/splitpkg-verify-*.json")):
    reports[f"{f.parent.parent.name}/{f.name}"] = json.loads(f.read_text())
built = sorted({f"{r.name}-{r.version}-{r.build_string}" for r in results})

packages = splitpkg_package.built_packages(channel)


# 3. Scenarios with the real solver, and the two environments installed.
async def scenarios():
    uri = channel.resolve().as_uri()
    virtual = [rattler.GenericVirtualPackage(rattler.PackageName("__cuda"), rattler.Version("13.0"), rattler.BuildString("0"))]
    out = {}
    wanted = {
        "default": ["pytorch"],
        "slim": ["pytorch", f"libtorch-cuda-linalg * *nomagma*"],
        "slim_with_libmagma": [f"libtorch-cuda-linalg * *nomagma*", "libmagma"],
    }
    for sid, specs in wanted.items():
        try:
            recs = await rattler.solve(sources=[uri], specs=specs, platforms=["linux-64", "noarch"], virtual_packages=virtual)
            out[sid] = {"specs": specs, "solved": sorted([str(r.name.normalized), str(r.version), str(r.build)] for r in recs)}
            if sid in ("default", "slim"):
                prefix = work / "envs" / sid
                await rattler.install(recs, target_prefix=prefix, cache_dir=work / "pkgs", show_progress=False)
                out[sid]["prefix"] = str(prefix)
        except SolverError as e:
            out[sid] = {"specs": specs, "unsolvable": str(e).splitlines()[0] if str(e) else "unsolvable"}
    return out

print(json.dumps({
    "built": built,
    "packages": packages,
    "scenarios": asyncio.run(scenarios()),
    "verify_reports": reports,
}))
# Written; skip the interpreter's finalization, where py-rattler's runtime threads can still be
# releasing the GIL (a "Fatal Python error" after the work is done: tests/py/solve_check.py).
sys.stdout.flush()
os._exit(0)
