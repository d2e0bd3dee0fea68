"""What the rattler-build tests share: the local `splitpkg` conda package they install (the binary
already built, and tools beside it, packaged at the binary's own version so the recipes'
`splitpkg >=X,<Y` requirement, emit::splitpkg_requirement, is met without compiling the crate
again), and the packages a build left in its output channel, as they describe them."""

import json
import pathlib
import shutil
import subprocess


def stage(dir: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """Write DIR/recipe.yaml for a package installing each source path in FILES as bin/NAME
    (FILES["splitpkg"] is the binary, asked for its version); return the recipe's path."""
    dir.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([files["splitpkg"], "--version"], check=True, capture_output=True, text=True).stdout.split()[1]
    installs = ""
    for name, src in files.items():
        shutil.copy(src, dir / name)
        installs += f'    - install -D -m 755 {name} "$PREFIX/bin/{name}"\n'
    (dir / "recipe.yaml").write_text(f"""schema_version: 1
package:
  name: splitpkg
  version: {version}
source:
  - path: .
build:
  number: 0
  dynamic_linking:
    binary_relocation: false
  script:
{installs}""")
    return dir / "recipe.yaml"


def built_packages(channel: pathlib.Path, subdir: str = "linux-64") -> dict:
    """Each package in CHANNEL's SUBDIR repodata: its relations, and the files it holds as rattler
    reads them back from the archive (hostile-name tests check that a name landed literally)."""
    import rattler

    repodata = json.loads((channel / subdir / "repodata.json").read_text())
    packages = {}
    for fn, rec in sorted(repodata.get("packages.conda", {}).items()):
        packages[fn] = {k: rec.get(k) for k in ("name", "version", "build", "build_number", "depends", "constrains", "track_features")}
        paths = rattler.PathsJson.from_package_archive(channel / subdir / fn)
        packages[fn]["paths"] = sorted(str(e.relative_path) for e in paths.paths)
    return packages
