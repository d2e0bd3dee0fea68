"""Build a feedstock patched by `splitpkg feedstock` with real rattler-build (py-rattler-build),
offline, for each CI config given (linux-64 natively, linux-aarch64 cross-compiled from linux-64),
then solve and install it per platform with py-rattler.

Usage: feedstock_build.py FEEDSTOCK_DIR MAGMA_SRC_DIR WORK_DIR SPLITPKG_BIN VARIANT_KEY CI_CONFIG...

1. A file:// channel gets the packages the recipes need:
   - compiler packages as conda-forge names them (`gcc_linux-64`, `gxx_linux-aarch64`, ...): stand-ins
     whose activation sets $CC/$CXX to `<triple>-conda-linux-gnu-cc`/`-c++`, small wrappers of the
     machine's gcc (linux-64) or Debian's aarch64 cross gcc (linux-aarch64). Built for linux-64: the
     build environment of a cross build is the build machine's.
   - `libmagma` and `libmagma-devel` per target platform (a gcc-built libmagma-like library; the devel
     package run-exports `libmagma`), compiled with those compilers;
   - `splitpkg` for linux-64 (the already-built x86-64 binary, packaged as it is; it runs in the
     build environment, also of a cross build: `splitpkg build-variant` and `verify-variant`).
2. The feedstock's recipe is built for each CI_CONFIG plus VARIANT_KEY with the values its
   conda_build_config.yaml lists (what `conda smithy rerender` writes into .ci_support), every
   variant, for the config's target_platform with build platform linux-64. Recipe tests use the
   "native" strategy: they run for linux-64 and are skipped for the cross-compiled linux-aarch64
   packages (which cannot run here; the JSON says so).
3. Per platform, scenarios are solved over the channel (a plain install, the slim variant, slim +
   libmagma) and the two environments installed under WORK_DIR/envs/PLATFORM (files only: nothing
   of an aarch64 environment runs).

A config whose cross compiler is not installed is not built: the JSON's "skipped" says why.

Prints one JSON document (last line): per platform, the packages from repodata.json with their
files, the solved scenarios, the environments' paths and the contract-check reports the lazy
builds wrote.
"""
import asyncio
import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

import splitpkg_package

import rattler
from rattler.exceptions import SolverError
from rattler.platform.subdir import Subdir
from rattler_build.cli_api import build_recipes

feedstock, magma_src, work, splitpkg_bin, key = sys.argv[1:6]
ci_configs = sys.argv[6:]
feedstock, magma_src, work = pathlib.Path(feedstock), pathlib.Path(magma_src), pathlib.Path(work)
channel = work / "channel"
channel.mkdir(parents=True, exist_ok=True)
BUILD_PLATFORM = "linux-64"
# conda-forge's compiler triples, and the Debian compilers the stand-ins wrap.
COMPILERS = {
    "linux-64": ("x86_64-conda-linux-gnu", "gcc", "g++"),
    "linux-aarch64": ("aarch64-conda-linux-gnu", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++"),
}


def build(recipe: pathlib.Path, variant_files=(), target=BUILD_PLATFORM, keep_build=False):
    """Build every variant of RECIPE for TARGET on BUILD_PLATFORM into the channel (indexed).

    The CLI's entry point: py-rattler-build 0.73's Stage0Recipe.run_build takes the host platform
    from the machine, so a cross build's host environment would get linux-64 packages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        build_recipes([str(recipe)], target_platform=target, host_platform=target, build_platform=BUILD_PLATFORM,
                      channel=[channel.resolve().as_uri()], variant_config=[str(v) for v in variant_files],
                      keep_build=keep_build, test="native", output_dir=str(channel))


def compilers_recipe(dir: pathlib.Path, targets) -> pathlib.Path:
    """Stand-ins for conda-forge's gcc_<target>/gxx_<target>: the activation sets CC/CXX to the
    conda triple's name, a wrapper on PATH in $BUILD_PREFIX/bin."""
    (dir / "src").mkdir(parents=True, exist_ok=True)
    outputs = ""
    for target in targets:
        triple, cc, cxx = COMPILERS[target]
        for pkg, var, tool, real in (("gcc", "CC", "cc", cc), ("gxx", "CXX", "c++", cxx)):
            name = f"{pkg}_{target}"
            (dir / "src" / f"{triple}-{tool}").write_text(f'#!/bin/sh\nexec {real} "$@"\n')
            (dir / "src" / f"activate-{name}.sh").write_text(f"export {var}={triple}-{tool}\n")
            run = f"\n    requirements:\n      run:\n        - gcc_{target}\n" if pkg == "gxx" else "\n"
            outputs += f"""  - package:
      name: {name}
    build:
      script:
        - install -D -m 755 {triple}-{tool} "$PREFIX/bin/{triple}-{tool}"
        - install -D -m 644 activate-{name}.sh "$PREFIX/etc/conda/activate.d/activate-{name}.sh"{run}"""
    (dir / "recipe.yaml").write_text(f"""schema_version: 1
recipe:
  name: compiler-standins
  version: "1.0.0"
source:
  - path: src
outputs:
{outputs}""")
    return dir / "recipe.yaml"


def magma_recipe(dir: pathlib.Path) -> pathlib.Path:
    shutil.copytree(magma_src, dir / "src", dirs_exist_ok=True)
    (dir / "recipe.yaml").write_text("""schema_version: 1
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
        - $CC -O1 -fPIC -shared -Wl,-soname,libmagma.so.2 -o "$PREFIX/lib/libmagma.so.2.10.0" magma.c
        - ln -s libmagma.so.2.10.0 "$PREFIX/lib/libmagma.so.2"
    requirements:
      build:
        - ${{ compiler('c') }}
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
    return dir / "recipe.yaml"


def target_of(config: pathlib.Path) -> str:
    lines = config.read_text().splitlines()
    i = lines.index("target_platform:")
    return lines[i + 1].removeprefix("- ").strip()


def variant_values() -> list[str]:
    values = []
    lines = (feedstock / "recipe" / "conda_build_config.yaml").read_text().splitlines()
    if f"{key}:" in lines:
        for line in lines[lines.index(f"{key}:") + 1:]:
            if not line.startswith("  - "):
                break
            values.append(line[4:].strip())
    if not values:
        sys.exit(f"{feedstock}/recipe/conda_build_config.yaml lists no {key}")
    return values


configs = [(c, target_of(feedstock / ".ci_support" / c)) for c in ci_configs]
skipped = {}
for c, t in configs:
    missing = [tool for tool in COMPILERS[t][1:] if shutil.which(tool) is None]
    if missing:
        skipped[t] = f"{', '.join(missing)} not installed (Debian: gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)"
targets = sorted({t for _, t in configs if t not in skipped})

helpers = work / "helpers"
# 1. compilers, libmagma / libmagma-devel per target, splitpkg (packaged, not compiled again).
build(compilers_recipe(helpers / "compilers", sorted(COMPILERS)))
for t in targets:
    build(magma_recipe(helpers / "magma"), target=t)
build(splitpkg_package.stage(helpers / "splitpkg", {"splitpkg": splitpkg_bin}))

# 1b. A pre-split, monolithic libtorch of the same version (the unpatched feedstock, whose
# libtorch ships lib/libtorch_cuda_linalg.so itself), in the same channel: the pins between the
# split's libtorch and libtorch-cuda-linalg end in the build number, which the patch bumped, so
# neither variant may be installed with it (scenarios below).
monolithic = os.environ.get("SPLITPKG_MONOLITHIC_FEEDSTOCK")
if monolithic and BUILD_PLATFORM in targets:
    m = pathlib.Path(monolithic)
    cuda_config = next(c for c, t in configs if t == BUILD_PLATFORM and "None" not in c)
    build(m / "recipe" / "recipe.yaml", [m / ".ci_support" / cuda_config], BUILD_PLATFORM)

# 2. The patched feedstock per config, both variants in one build call (one CI job each).
extra = work / "variant-key.yaml"
extra.write_text(f"{key}:\n" + "".join(f"  - {v}\n" for v in variant_values()))
# keep_build: the work directories stay, with the verify-variant report each lazy build wrote.
result = {"skipped": skipped, "platforms": {}}
for config, target in configs:
    if target in skipped:
        continue
    bld = channel / "bld"
    shutil.rmtree(bld, ignore_errors=True)  # only this config's work directories below
    build(feedstock / "recipe" / "recipe.yaml", [feedstock / ".ci_support" / config, extra], target, keep_build=True)
    reports = {}
    for f in sorted(bld.glob("*/work/splitpkg-verify-*.json")):
        reports[f"{f.parent.parent.name}/{f.name}"] = json.loads(f.read_text())
    result["platforms"][target] = {
        "config": config,
        "tests": "native" if target == BUILD_PLATFORM else f"skipped: built for {target} on {BUILD_PLATFORM} (test strategy native)",
        "verify_reports": reports,
    }


# What a process does with an installed environment: load libtorch_cuda.so, make the first linalg
# call (it dlopens libtorch_cuda_linalg.so, whose initialiser registers the kernel) and call the
# kernel through the stub libtorch_cpu holds. lu_factor(200) takes the MAGMA path only in the magma
# variant.
PROBE = r"""
#include <dlfcn.h>
#include <stdio.h>
struct stub { int (*cuda)(int); };
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lib/libtorch_cuda.so", argv[1]);
    void *cuda = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!cuda) { printf("dlopen: %s\n", dlerror()); return 1; }
    int (*call)(int) = (int (*)(int))dlsym(cuda, "_ZN2at4cuda11linalg_callEi");
    struct stub *s = (struct stub *)dlsym(cuda, "_ZN2at6native14lu_factor_stubE");
    /* torch.cuda.has_magma: CUDAHooks::hasMAGMA() with the feedstock's source patch applied */
    int (*has_magma)(void) = (int (*)(void))dlsym(cuda, "mini_cuda_has_magma");
    if (!call || !s || !has_magma) { printf("dlsym: %s\n", dlerror()); return 1; }
    int magma = has_magma();
    int first = call(200);
    printf("has_magma=%d linalg_call(200)=%d stub(200)=%d\n", magma, first, s->cuda ? s->cuda(200) : -100);
    return 0;
}
"""


def probe(target: str, prefix: pathlib.Path) -> dict:
    """PROBE cross-compiled for TARGET and run on PREFIX: natively on linux-64, under qemu-user for
    linux-aarch64 (an emulated result, labelled so)."""
    src = work / "probe.c"
    src.write_text(PROBE)
    exe = work / f"probe-{target}"
    subprocess.run([COMPILERS[target][1], "-O1", "-o", str(exe), str(src), "-ldl"], check=True)
    if target == BUILD_PLATFORM:
        cmd, runner = [str(exe)], "native"
    elif shutil.which("qemu-aarch64"):
        cmd, runner = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(exe)], "emulated (qemu-aarch64)"
    else:
        return {"runner": "SKIPPED because qemu-aarch64 is not installed (Debian: qemu-user)"}
    o = subprocess.run(cmd + [str(prefix)], capture_output=True, text=True)
    return {"runner": runner, "rc": o.returncode, "stdout": o.stdout.strip(), "stderr": o.stderr.strip()}


# 3. Scenarios with the real solver, and the two environments installed, per platform.
async def scenarios(target: str):
    uri = channel.resolve().as_uri()
    virtual = [rattler.GenericVirtualPackage(rattler.PackageName("__cuda"), rattler.Version("13.0"), rattler.BuildString("0"))]
    out = {}
    wanted = {
        "default": ["pytorch"],
        "slim": ["pytorch", "libtorch-cuda-linalg * *nomagma*"],
        "slim_with_libmagma": ["libtorch-cuda-linalg * *nomagma*", "libmagma"],
    }
    if monolithic and target == BUILD_PLATFORM:
        # the pre-split libtorch is build 200; the split's are 201
        wanted["monolithic_alone"] = ["libtorch * *_200"]
        wanted["monolithic_with_magma"] = ["libtorch * *_200", "libtorch-cuda-linalg * *_magma_*"]
        wanted["monolithic_with_nomagma"] = ["libtorch * *_200", "libtorch-cuda-linalg * *nomagma*"]
    for sid, specs in wanted.items():
        try:
            recs = await rattler.solve(sources=[uri], specs=specs, platforms=[target, "noarch"], virtual_packages=virtual)
            out[sid] = {"specs": specs, "solved": sorted([str(r.name.normalized), str(r.version), str(r.build)] for r in recs)}
            if sid in ("default", "slim"):
                prefix = work / "envs" / target / sid
                await rattler.install(recs, target_prefix=prefix, cache_dir=work / "pkgs", platform=Subdir(target),
                                      show_progress=False)
                out[sid]["prefix"] = str(prefix)
                out[sid]["probe"] = probe(target, prefix)
        except SolverError as e:
            out[sid] = {"specs": specs, "unsolvable": str(e).splitlines()[0] if str(e) else "unsolvable"}
    return out


for target, r in result["platforms"].items():
    r["packages"] = splitpkg_package.built_packages(channel, target)
    r["scenarios"] = asyncio.run(scenarios(target))

print(json.dumps(result))
# Written; skip the interpreter's finalization, where py-rattler's runtime threads can still be
# releasing the GIL (a "Fatal Python error" after the work is done: tests/py/solve_check.py).
sys.stdout.flush()
os._exit(0)
