"""Render a feedstock's v1 recipe with real rattler-build (py-rattler-build), offline, for every
linux .ci_support config (linux-64, and linux-aarch64 cross-compiled from linux-64 as the
feedstock's conda-forge.yml says), before and after `splitpkg feedstock`, and derive what
`conda smithy rerender` would write into each .ci_support file.

Usage: feedstock_render.py ORIGINAL_DIR PATCHED_DIR VARIANT_KEY   (prints the JSON document)
       feedstock_render.py --summary RENDER.json                 (Markdown tables of a run)
       feedstock_render.py --rerender RENDER.json ORIGINAL_DIR   (unified diff of .ci_support)
       feedstock_render.py --readme RENDER.json README.md        (README with this run's table)

The patched recipe is rendered with each config plus VARIANT_KEY and the values the patched
recipe/conda_build_config.yaml lists: what the rerendered .ci_support files hold (see below).

What conda-smithy writes (conda_smithy/configure_feedstock.py at conda-smithy 081ec6ba,
2026-08-08): `_render_ci_provider` renders the recipe once per platform with every variant of
that platform (`rattler_build_conda_compat.render.render`; for v1 recipes
`MetaData.get_used_vars` is the key set of each rendered output's variant).
`_collapse_subpackage_variants` then takes `all_used_vars`, the UNION over every output of the
platform, and the job keys, the INTERSECTION over the outputs; `break_up_top_level_values` writes
one file per value of the job keys and puts every other used key, with all its used values, into
every file of the platform. So a key one output uses lands in all the platform's .ci_support
files, CPU ones included; the PR's own files show it (libmagma_devel, nccl and libcudnn_dev, used
only by CUDA builds, are in the linux CPU files and not in the osx ones). This script models the
rule on the render of the .ci_support files themselves and checks that the model gives back the
keys the existing files have before it derives what the patch adds.
"""
import difflib
import json
import pathlib
import shutil
import sys
import tempfile

import rattler_build as rb

# The feedstock's conda-forge.yml: `build_platform: linux_aarch64: linux_64` (cross-compiled).
PLATFORMS = {"linux_64": "linux-64", "linux_aarch64": "linux-aarch64"}
BUILD_PLATFORM = "linux-64"
LAZY = "libtorch-cuda-linalg"
# Keys conda-smithy keeps whether an output uses them or not (_collapse_subpackage_variants,
# always_keep_keys; github_actions_labels because the feedstock builds on GitHub Actions).
ALWAYS_KEEP = {"zip_keys", "pin_run_as_build", "MACOSX_DEPLOYMENT_TARGET", "MACOSX_SDK_VERSION",
               "macos_min_version", "macos_machine", "channel_sources", "channel_targets",
               "docker_image", "build_number_decrement", "target_platform", "github_actions_labels"}
# Keys of a rendered variant that are not .ci_support keys (rattler-build adds them).
NOT_CONFIG = {"build_platform"}


def platform_of(name: str) -> str:
    return next(p for p in PLATFORMS if name.startswith(p + "_"))


def pins(reqs) -> list:
    """The requirements that tie the split together: libtorch, the lazy output, MAGMA."""
    return sorted(str(x) for x in reqs if any(w in str(x) for w in ("libtorch", "libmagma", "linalg")))


def config_keys(files: list) -> dict:
    vc = rb.VariantConfig.from_files([str(f) for f in files])
    return {k: [str(v) for v in vc.get_values(k)] for k in vc.keys()}


def describe(v, key: str) -> dict:
    s = v.recipe
    req = s.requirements.to_dict()
    variant = {k: str(x) for k, x in v.variant.items()}
    out = {
        "name": s.package.name,
        "build": s.build.string,
        "used_keys": sorted(set(variant) - NOT_CONFIG),
        "arm_variant_type": variant.get("arm_variant_type"),
        "variant_key": variant.get(key),
        "run": pins(req.get("run", [])),
        "run_constraints": pins(req.get("run_constraints", [])),
        "host": sorted(str(x) for x in req.get("host", []) if "magma" in str(x)),
        "down_prioritize_variant": (s.to_dict().get("build", {}).get("variant") or {}).get("down_prioritize_variant"),
    }
    if out["name"] == LAZY:
        out["build_requirements"] = sorted(str(x) for x in req.get("build", []))
    return out


def render(recipe_dir: pathlib.Path, files: list, target: str, key: str) -> dict:
    recipe = rb.Stage0Recipe.from_file(str(recipe_dir / "recipe" / "recipe.yaml"))
    rc = rb.RenderConfig(platform=rb.PlatformConfig(target_platform=target, build_platform=BUILD_PLATFORM,
                                                    host_platform=target))
    keys = config_keys(files)
    loop = {k for k, vals in keys.items() if len(vals) > 1 and k != "zip_keys"}
    outputs, used = {}, []
    for v in recipe.render(rb.VariantConfig.from_files([str(f) for f in files]), rc):
        o = describe(v, key)
        used.append(set(o["used_keys"]) & set(keys))
        outputs[(o["name"], o["build"])] = o
    counts = {}
    for (name, _b) in outputs:
        counts[name] = counts.get(name, 0) + 1
    return {"outputs": sorted(outputs.values(), key=lambda o: (o["name"], o["build"])), "counts": counts,
            # what conda-smithy splits CI jobs on (intersection over outputs, loop keys only)
            "job_keys": sorted(set.intersection(*used) & loop) if used else [],
            # the keys some output of this config uses (the union over this config alone)
            "used_keys": sorted(set.union(*used)) if used else [],
            "loop_vars": sorted(loop)}


def key_values(text: str, key: str) -> list:
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


def smithy_model(configs: dict, files: dict, side: str) -> dict:
    """conda-smithy's rule per platform: the keys every .ci_support file of the platform gets are
    the union of the keys any output of the platform uses, plus the always-kept ones, among the
    keys the variant input has; the used values of each."""
    model = {}
    for plat in PLATFORMS:
        names = [n for n in configs if platform_of(n) == plat]
        if not names:
            continue
        union = set.union(*(set(configs[n][side]["used_keys"]) for n in names))
        inputs = set.union(*(set(files[n][side]) for n in names))
        keys = sorted((union | ALWAYS_KEEP) & inputs)
        # keys with more than one value over the platform (what conda-build calls loop variables)
        loop = {k for k in inputs if k != "zip_keys" and len({v for n in names for v in files[n][side].get(k, [])}) > 1}
        top = set.intersection(*(set(o["used_keys"]) for n in names for o in configs[n][side]["outputs"])) & loop
        model[plat] = {"configs": names, "keys": keys, "union_over_outputs": sorted(union), "job_keys": sorted(top)}
    return model


def check_model(model: dict, files: dict, configs: dict) -> dict:
    """Where a model's key set differs from an existing .ci_support file's: the platform rule
    (should be nowhere) and, for contrast, a rule that took only the config's own outputs."""
    bad = {"platform_union": [], "config_union": []}
    for plat, m in model.items():
        for n in m["configs"]:
            have = set(files[n]["before"])
            own = (set(configs[n]["before"]["used_keys"]) | ALWAYS_KEEP) & have
            for rule, want in (("platform_union", set(m["keys"])), ("config_union", own)):
                if have != want:
                    bad[rule].append({"file": n, "missing_from_model": sorted(have - want),
                                      "extra_in_model": sorted(want - have)})
            # the job keys name the file (conda_smithy package_key): each must be in its name
            if any(k not in n for k in m["job_keys"]):
                bad["platform_union"].append({"file": n, "job_keys_not_in_name": m["job_keys"]})
    return bad


def main(original: pathlib.Path, patched: pathlib.Path, key: str) -> dict:
    values = key_values((patched / "recipe" / "conda_build_config.yaml").read_text(), key)
    if not values:
        sys.exit(f"{patched}/recipe/conda_build_config.yaml has no {key}")
    extra = pathlib.Path(tempfile.mkdtemp()) / "variant-key.yaml"
    extra.write_text(f"{key}:\n" + "".join(f"  - {v}\n" for v in values))
    ci = sorted(c for p in PLATFORMS for c in (original / ".ci_support").glob(f"{p}_*.yaml"))
    if not ci:
        sys.exit(f"{original}/.ci_support has no linux_*.yaml")
    result = {"variant_key": key, "values": values, "configs": {}, "build_platform": BUILD_PLATFORM}
    rebased = with_build_base_of(original, patched, extra.parent)
    result["build_base"] = {"before": build_base(original), "after": build_base(patched)}
    files = {}
    for c in ci:
        target = PLATFORMS[platform_of(c.name)]
        after_files = [patched / ".ci_support" / c.name, extra]
        files[c.name] = {"before": config_keys([c]), "after": config_keys(after_files)}
        after = render(patched, after_files, target, key)
        result["configs"][c.name] = {
            "target_platform": target,
            "before": render(original, [c], target, key),
            "after": after,
            # the patched recipe with the original build_base: the split alone, without the bump
            "after_with_original_build_base": builds(render(rebased, after_files, target, key))
            if rebased else builds(after),
        }
    before = smithy_model(result["configs"], files, "before")
    after = smithy_model(result["configs"], files, "after")
    result["smithy"] = {"before": before, "after": after, "model_mismatches_before": check_model(before, files, result["configs"])}
    result["rerender_adds"] = rerender_adds(result, before, after)
    result["ci_support_files"] = {"before": len(list((original / ".ci_support").glob("*.yaml"))),
                                  "after": len(list((patched / ".ci_support").glob("*.yaml")))}
    return result


def build_base(feedstock: pathlib.Path) -> str:
    """The `build_base:` value of the recipe's context (PR #518 adds offsets to it per variant)."""
    for line in (feedstock / "recipe" / "recipe.yaml").read_text().splitlines():
        if line.strip().startswith("build_base:"):
            return line.split(":", 1)[1].strip()
    return ""


def with_build_base_of(original: pathlib.Path, patched: pathlib.Path, tmp: pathlib.Path):
    """A copy of the patched recipe with the original build_base, or None when they are equal: its
    render separates what the split changes from what the build-number bump changes."""
    old, new = build_base(original), build_base(patched)
    if old == new:
        return None
    text = (patched / "recipe" / "recipe.yaml").read_text()
    dst = tmp / "rebased"
    shutil.copytree(patched / "recipe", dst / "recipe")
    (dst / "recipe" / "recipe.yaml").write_text(text.replace(f"build_base: {new}\n", f"build_base: {old}\n", 1))
    return dst


def builds(side: dict) -> list:
    return [[o["name"], o["build"]] for o in side["outputs"]]


def rerender_adds(result: dict, before: dict, after: dict) -> dict:
    """Per .ci_support file: the keys (with their used values, in input order) the rerender adds."""
    adds, key = {}, result["variant_key"]
    for plat, m in after.items():
        new = set(m["keys"]) - set(before[plat]["keys"])
        # Every key of an existing file is in the before model (checked), so only the key the patch
        # introduces can be new.
        if not new <= {key}:
            sys.exit(f"{plat}: the rerender would add {sorted(new)}, not only {key}")
        used = {o["variant_key"] for c in m["configs"] for o in result["configs"][c]["after"]["outputs"]} - {None}
        for n in m["configs"]:
            adds[n] = {key: [v for v in result["values"] if v in used]} if new else {}
    return adds


def rerender_diff(r: dict, original: pathlib.Path) -> str:
    """A unified diff per .ci_support file: each added key inserted where yaml.dump's sorted
    top-level keys put it (conda-smithy dumps the config with PyYAML's default sort)."""
    out = []
    for name, keys in sorted(r["rerender_adds"].items()):
        old = (original / ".ci_support" / name).read_text().splitlines(keepends=True)
        new = list(old)
        for k, vals in sorted(keys.items()):
            block = [f"{k}:\n"] + [f"- {v}\n" for v in vals]
            at = next((i for i, line in enumerate(new) if line[:1].strip() and not line.startswith("-")
                       and line.split(":")[0] > k), len(new))
            new[at:at] = block
        out += difflib.unified_diff(old, new, f"a/.ci_support/{name}", f"b/.ci_support/{name}")
    return "".join(out)


def is_cuda(name: str) -> bool:
    return "cuda_compiler_versionNone" not in name


def short(name: str) -> str:
    return name.replace("channel_targetsconda-forge_main", "").replace("is_rcFalse.yaml", "").rstrip("_")


def split_only(c: dict) -> str:
    """Whether the outputs that existed before keep their build strings once the build-number
    bump is taken out (the split alone changes no existing build)."""
    before = {tuple(b) for b in builds(c["before"])}
    kept = {tuple(b) for b in c["after_with_original_build_base"] if tuple(b)[0] != LAZY}
    return "identical" if kept == before else f"{len(before ^ kept)} differ"


def summary(r: dict) -> str:
    """Markdown: the configs in one table, conda-smithy's rule per platform, then every config."""
    bb = r["build_base"]
    out = [f"# PR #518 rendered before and after `splitpkg feedstock` (variant key `{r['variant_key']}`: "
           f"{', '.join(r['values'])})", "",
           "Real rattler-build (py-rattler-build 0.73), offline, `Stage0Recipe.render` per linux `.ci_support` config "
           f"(linux-aarch64 cross-compiled: build platform {r['build_platform']}); after the patch each config also has "
           f"`{r['variant_key']}` with the patched `conda_build_config.yaml`'s values, as the rerendered file will "
           "(rerender.diff). Generated by docs/evidence/feedstock/run.sh (tests/py/feedstock_render.py --summary).", "",
           f"`.ci_support` files: {r['ci_support_files']['before']} before, {r['ci_support_files']['after']} after. "
           f"`build_base`: {bb['before']} before, {bb['after']} after (every build number moves with it).", "",
           ] + config_table(r)
    out += ["", "Outputs are distinct (name, build string) pairs; linux-aarch64 CUDA 12.9 builds libtorch twice "
            "(`arm_variant_type` sbsa and tegra, zipped with the CUDA version in one `.ci_support` file), 13.0 once (sbsa).", ""]
    out += smithy_section(r)
    for name, c in r["configs"].items():
        out += config_section(name, c, r["variant_key"])
    return "\n".join(out)


def config_table(r: dict) -> list:
    out = ["| config | platform | CUDA | outputs before | after | lazy builds (magma + nomagma) | "
           "existing builds, patch without the build_base bump | rerender adds |",
           "|---|---|---|---|---|---|---|---|"]
    for name, c in r["configs"].items():
        lazy = [o for o in c["after"]["outputs"] if o["name"] == LAZY]
        magma = sum(1 for o in lazy if o["variant_key"] == r["values"][0])
        adds = "; ".join(f"`{k}`: {', '.join(v)}" for k, v in r["rerender_adds"][name].items()) or "nothing"
        out.append(f"| `{short(name)}` | {c['target_platform']} | {'yes' if is_cuda(name) else 'no'} | "
                   f"{len(c['before']['outputs'])} | {len(c['after']['outputs'])} | {len(lazy)} ({magma} + {len(lazy) - magma}) | "
                   f"{split_only(c)} | {adds} |")
    return out


def readme(r: dict, path: pathlib.Path) -> str:
    """README.md with the block between the table markers replaced by this run's config table."""
    text = path.read_text()
    begin, end = "<!-- table: run.sh writes it -->\n", "<!-- end of table -->\n"
    head, rest = text.split(begin, 1)
    return head + begin + "\n".join(config_table(r)) + "\n" + end + rest.split(end, 1)[1]


def smithy_section(r: dict) -> list:
    s = r["smithy"]
    out = ["## What `conda smithy rerender` writes, per platform", "",
           "The rule (conda_smithy/configure_feedstock.py, `_collapse_subpackage_variants`): every `.ci_support` file of "
           "a platform gets each key that some output of that platform uses (plus the always-kept keys); CI jobs split "
           "only on the keys every output uses. Checked on the PR's own files first: "
           f"{'the rule gives back every linux file' if not s['model_mismatches_before']['platform_union'] else 'MISMATCH: ' + json.dumps(s['model_mismatches_before']['platform_union'])}"
           f"; a rule that took only each config's own outputs would miss keys in "
           f"{len(s['model_mismatches_before']['config_union'])} of {len(r['configs'])} files "
           "(e.g. `libmagma_devel`, `nccl` in the CPU files).", "",
           "| platform | files | CI-job keys before | after | keys added to every file |", "|---|---|---|---|---|"]
    for plat, a in s["after"].items():
        b = s["before"][plat]
        added = sorted(set(a["keys"]) - set(b["keys"]))
        out.append(f"| {plat} | {len(a['configs'])} | {', '.join(b['job_keys'])} | {', '.join(a['job_keys'])} | "
                   f"{', '.join(f'`{k}`: ' + ', '.join(r['rerender_adds'][a['configs'][0]].get(k, [])) for k in added) or 'none'} |")
    out += ["", "CI-job keys here are the keys every output uses that have more than one value over the platform's files; "
            "the file names also carry `channel_targets` and `is_rc`, which the recipe's `conda_build_config.yaml` zips "
            "with two values (main/False, pytorch_rc/True) and the files hold with one.", ""]
    return out


def used_keys_line(c: dict, n: str) -> str:
    """The variant keys an output uses: all of them for a new output, else what changed."""
    def keys(side):
        return set().union(*(set(o["used_keys"]) for o in c[side]["outputs"] if o["name"] == n))
    b, a = keys("before"), keys("after")
    if not b:
        return f"- `{n}` (new): {', '.join(sorted(a))}"
    diff = [f"+{k}" for k in sorted(a - b)] + [f"-{k}" for k in sorted(b - a)]
    return f"- `{n}`: {', '.join(diff) if diff else f'unchanged ({len(a)} keys)'}"


def config_section(name: str, c: dict, key: str) -> list:
    out = [f"## {name}", "", "| output | build string before | build string after |", "|---|---|---|"]
    names = sorted(set(c["before"]["counts"]) | set(c["after"]["counts"]))
    for n in names:
        b = sorted(o["build"] for o in c["before"]["outputs"] if o["name"] == n)
        a = sorted(o["build"] for o in c["after"]["outputs"] if o["name"] == n)
        for i in range(max(len(a), len(b))):
            out.append(f"| {n} | {b[i] if i < len(b) else '—'} | {a[i] if i < len(a) else '—'} |")
    out += ["", "Variant keys used (after, against before):", ""] + [used_keys_line(c, n) for n in names]
    if any(o["name"] == LAZY for o in c["after"]["outputs"]):
        out += ["", "Relations as rendered (after):", ""]
        for o in c["after"]["outputs"]:
            if o["name"] in ("libtorch", LAZY):
                arm = f" ({o['arm_variant_type']})" if o["arm_variant_type"] else ""
                out.append(f"- `{o['name']}` `{o['build']}`{arm}, {key} {o['variant_key'] or '—'}: run {o['run'] or '—'}, "
                           f"run_constraints {o['run_constraints'] or '—'}, host {o['host'] or '—'}, "
                           f"down_prioritize_variant {o['down_prioritize_variant']}")
                if "build_requirements" in o:
                    out.append(f"  - build requirements: {', '.join(o['build_requirements'])}")
    out.append("")
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        print(summary(json.loads(pathlib.Path(sys.argv[2]).read_text())))
    elif sys.argv[1] == "--readme":
        sys.stdout.write(readme(json.loads(pathlib.Path(sys.argv[2]).read_text()), pathlib.Path(sys.argv[3])))
    elif sys.argv[1] == "--rerender":
        sys.stdout.write(rerender_diff(json.loads(pathlib.Path(sys.argv[2]).read_text()), pathlib.Path(sys.argv[3])))
    else:
        print(json.dumps(main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]), indent=1, sort_keys=True))
