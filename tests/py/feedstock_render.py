"""Render a feedstock's v1 recipe with real rattler-build (py-rattler-build), offline, for every
linux-64 .ci_support config, before and after `splitpkg feedstock`.

Usage: feedstock_render.py ORIGINAL_DIR PATCHED_DIR VARIANT_KEY

For the patched recipe each config also gets VARIANT_KEY with the values the patched
recipe/conda_build_config.yaml lists (what `conda smithy rerender` writes into the .ci_support
files of the configs where an output uses the key). Prints one JSON document: per config, the
distinct rendered outputs (name, build string, a few requirements), the count per output name, and
the keys conda-smithy would split CI jobs on for that config: the intersection over all rendered
outputs of the loop variables each uses (conda_smithy/configure_feedstock.py,
_collapse_subpackage_variants; v1 outputs report their used keys through
rattler_build_conda_compat.render.MetaData.get_used_vars, i.e. the rendered variant's keys).
"""
import json
import pathlib
import sys
import tempfile

import rattler_build as rb

original, patched, key = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
rc = rb.RenderConfig(platform=rb.PlatformConfig(target_platform="linux-64", build_platform="linux-64", host_platform="linux-64"))


def flat(v):
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [s for x in v for s in flat(x)]
    if isinstance(v, dict):
        return [s for k in ("then", "else") if k in v for s in flat(v[k])]
    return []


def render(recipe_dir: pathlib.Path, configs: list):
    recipe = rb.Stage0Recipe.from_file(str(recipe_dir / "recipe" / "recipe.yaml"))
    vc = rb.VariantConfig.from_files([str(c) for c in configs])
    loop = {k for k in vc.keys() if len(vc.get_values(k)) > 1 and k != "zip_keys"}
    outputs, used = {}, []
    for v in recipe.render(vc, rc):
        s = v.recipe
        req = s.requirements.to_dict()
        name = s.package.name
        used.append(set(v.variant.keys()))
        outputs[(name, s.build.string)] = {
            "name": name,
            "build": s.build.string,
            "run": sorted(str(x) for x in req.get("run", []) if key in str(x) or "libtorch-cuda-linalg" in str(x) or "libmagma" in str(x)),
            "run_constraints": sorted(str(x) for x in req.get("run_constraints", [])
                                      if "libtorch" in str(x) or "libmagma" in str(x)),
            "host": sorted(str(x) for x in req.get("host", []) if "magma" in str(x)),
            "variant_key": v.variant.get(key),
            "down_prioritize_variant": (s.to_dict().get("build", {}).get("variant") or {}).get("down_prioritize_variant"),
        }
    counts = {}
    for (name, _b) in outputs:
        counts[name] = counts.get(name, 0) + 1
    job_keys = sorted(set.intersection(*used) & loop) if used else []
    return {"outputs": sorted(outputs.values(), key=lambda o: (o["name"], o["build"])), "counts": counts, "job_keys": job_keys,
            "loop_vars": sorted(loop)}


def key_values(text: str):
    """The `KEY:` block list of a conda_build_config.yaml (plain `  - value` items, as splitpkg writes it)."""
    lines = text.splitlines()
    if f"{key}:" not in lines:
        return []
    out = []
    for line in lines[lines.index(f"{key}:") + 1:]:
        if not line.startswith("  - "):
            break
        out.append(line[4:].strip())
    return out


values = key_values((patched / "recipe" / "conda_build_config.yaml").read_text())
if not values:
    sys.exit(f"{patched}/recipe/conda_build_config.yaml has no {key}")
extra = pathlib.Path(tempfile.mkdtemp()) / "variant-key.yaml"
extra.write_text(f"{key}:\n" + "".join(f"  - {v}\n" for v in values))

result = {"variant_key": key, "values": values, "configs": {}}
ci = sorted((original / ".ci_support").glob("linux_64_*.yaml"))
if not ci:
    sys.exit(f"{original}/.ci_support has no linux_64_*.yaml")
for c in ci:
    result["configs"][c.name] = {
        "before": render(original, [c]),
        "after": render(patched, [patched / ".ci_support" / c.name, extra]),
    }
result["ci_support_files"] = {"before": len(list((original / ".ci_support").glob("*.yaml"))),
                              "after": len(list((patched / ".ci_support").glob("*.yaml")))}
print(json.dumps(result, indent=1, sort_keys=True))
