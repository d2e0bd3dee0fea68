"""The local `splitpkg` conda package that the rattler-build tests install: the binary already built
(and tools beside it), packaged at the binary's own version so the recipes' `splitpkg >=X,<Y`
requirement (emit::splitpkg_requirement) is met without compiling the crate again."""

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
