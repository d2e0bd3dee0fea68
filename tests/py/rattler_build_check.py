"""Build an emitted recipe.yaml with real rattler-build (py-rattler-build), offline, both variants.

Usage: rattler_build_check.py RECIPE_DIR STAGE_DIR WORK_DIR SPLITPKG_BIN PAYLOAD_VERSION

Makes a file:// channel with two real packages the recipe needs (a `libmagma` stand-in and a
`splitpkg` package wrapping the freshly built binary, both built here by rattler-build), copies the
recipe next to the stage, renders it, builds every variant with tests run natively (the lazy
output's test calls `splitpkg verify-variant`), and prints one JSON document describing the
packages from the channel's repodata.json.
"""
import json
import pathlib
import shutil
import sys

import splitpkg_package

import rattler_build as rb

recipe_dir, stage_dir, work, splitpkg_bin, payload_version = map(str, sys.argv[1:6])
work = pathlib.Path(work)
channel = work / "channel"
channel.mkdir(parents=True, exist_ok=True)
tools = rb.ToolConfiguration(test_strategy="native")


def build(recipe: pathlib.Path, variants: pathlib.Path | None = None):
    r = rb.Stage0Recipe.from_file(str(recipe))
    vc = rb.VariantConfig.from_file(str(variants)) if variants else None
    return r.run_build(variant_config=vc, tool_config=tools, output_dir=str(channel),
                       channels=[channel.resolve().as_uri()], no_build_id=True)


# Stand-ins the split recipe needs from a channel.
helpers = work / "helpers"
(helpers / "libmagma").mkdir(parents=True, exist_ok=True)
(helpers / "libmagma" / "recipe.yaml").write_text(f"""schema_version: 1
package:
  name: libmagma
  version: {payload_version}
build:
  number: 0
  script:
    - mkdir -p "$PREFIX/share/libmagma-standin"
    - echo "stand-in for tests; not MAGMA" > "$PREFIX/share/libmagma-standin/README"
""")
build(helpers / "libmagma" / "recipe.yaml")
build(splitpkg_package.stage(helpers / "splitpkg", {"splitpkg": splitpkg_bin}))

# The split recipe, next to its stage.
split = work / "split"
shutil.copytree(recipe_dir, split, dirs_exist_ok=True)
shutil.copytree(stage_dir, split / "stage", dirs_exist_ok=True)
rendered = rb.Stage0Recipe.from_file(str(split / "recipe.yaml")).render(rb.VariantConfig.from_file(str(split / "variants.yaml")))
results = build(split / "recipe.yaml", split / "variants.yaml")

packages = splitpkg_package.built_packages(channel)
# A file name that ran as code (tests name such files PWNED*) would have left one behind.
pwned = sorted(str(p) for p in work.rglob("PWNED*"))
print(json.dumps({
    "pwned": pwned,
    "rendered_variants": len(rendered),
    "built": sorted({f"{r.name}-{r.version}-{r.build_string}" for r in results}),
    "packages": packages,
}))
