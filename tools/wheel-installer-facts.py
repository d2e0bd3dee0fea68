#!/usr/bin/env python3
"""What real pip and uv do with a split torch wheel set — the facts `splitpkg wheel` (issue 14) is
designed from, measured on tiny stand-in wheels (three files under torch/, same layout as torch's).

Usage: tools/wheel-installer-facts.py PIP_VENV_PYTHON [--uv UV] [--out FILE.md]

PIP_VENV_PYTHON is a Python whose pip is the one to test (fresh venvs are made from it with
`-m venv`); UV an uv binary. Offline: every install is `--no-index --find-links DIR`.

Wheels written here (all stand-ins: the files hold their own names, not torch):
  mono  torch 2.11.0                      torch/lib/{libtorch_cuda.so, libtorch_cuda_linalg.so (magma)}
  core  torch 2.11.0+split                torch/lib/libtorch_cuda.so; Requires-Dist torch-cuda-linalg==2.11.0
  lazy  torch-cuda-linalg 2.11.0+LABEL    torch/lib/libtorch_cuda_linalg.so; Requires-Dist torch==2.11.0+split
for two label schemes (which variant a plain `pip install torch` gets is a question of ordering).
"""
import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile


def wheel(dirpath, name, version, files, requires=()):
    dist = name.replace("-", "_")
    tag = "py3-none-any"
    fn = os.path.join(dirpath, f"{dist}-{version}-{tag}.whl")
    di = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    members = dict(files)
    members[f"{di}/METADATA"] = meta
    members[f"{di}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: splitpkg-facts\nRoot-Is-Purelib: false\nTag: {tag}\n"
    record = []
    for path, text in members.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    members[f"{di}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(fn, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in members.items():
            z.writestr(path, text)
    return fn


def build(d, labels):
    os.makedirs(d, exist_ok=True)
    core_files = {"torch/__init__.py": "", "torch/lib/libtorch_cuda.so": "core\n"}
    mono = dict(core_files)
    mono["torch/lib/libtorch_cuda_linalg.so"] = "linalg: monolithic (magma)\n"
    os.makedirs(d + "/mono", exist_ok=True)
    wheel(d + "/mono", "torch", "2.11.0", mono)
    split = d + "/split"
    os.makedirs(split, exist_ok=True)
    wheel(split, "torch", "2.11.0+split", core_files, ["torch-cuda-linalg==2.11.0"])
    for variant, label in labels.items():
        wheel(split, "torch-cuda-linalg", f"2.11.0+{label}", {"torch/lib/libtorch_cuda_linalg.so": f"linalg: {variant}\n"},
              ["torch==2.11.0+split"])
    both = d + "/both"
    os.makedirs(both, exist_ok=True)
    for f in os.listdir(d + "/mono") + os.listdir(split):
        src = os.path.join(d + "/mono", f) if os.path.exists(os.path.join(d + "/mono", f)) else os.path.join(split, f)
        shutil.copy(src, both)
    return d + "/mono", split, both


class Env:
    def __init__(self, root, base_python, uv):
        self.root, self.uv = root, uv
        subprocess.run([base_python, "-m", "venv", "--without-pip", root], check=True)
        self.python = os.path.join(root, "bin", "python")
        self.pip_python = base_python  # pip from the base interpreter, pointed at this venv

    def install(self, tool, links, *args):
        if tool == "pip":
            cmd = [self.pip_python, "-m", "pip", "--python", self.python, "install", "-q", "--no-index", "--find-links", links, *args]
        else:
            cmd = [self.uv, "pip", "install", "-q", "--offline", "--no-index", "--find-links", links, "--python", self.python, *args]
        return subprocess.run(cmd, capture_output=True, text=True)

    def uninstall(self, tool, *names):
        if tool == "pip":
            cmd = [self.pip_python, "-m", "pip", "--python", self.python, "uninstall", "-q", "-y", *names]
        else:
            cmd = [self.uv, "pip", "uninstall", "-q", "--python", self.python, *names]
        return subprocess.run(cmd, capture_output=True, text=True)

    def check(self, tool):
        cmd = [self.pip_python, "-m", "pip", "--python", self.python, "check"] if tool == "pip" else \
            [self.uv, "pip", "check", "--python", self.python]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return "clean" if r.returncode == 0 else "broken: " + " ".join((r.stdout + r.stderr).split())[:160]

    def state(self):
        site = subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        lib = os.path.join(site, "torch", "lib", "libtorch_cuda_linalg.so")
        content = open(lib).read().strip() if os.path.exists(lib) else "MISSING"
        core = "present" if os.path.exists(os.path.join(site, "torch", "lib", "libtorch_cuda.so")) else "MISSING"
        owners, dists = [], []
        for e in sorted(os.listdir(site)):
            if e.endswith(".dist-info") and (e.startswith("torch-") or e.startswith("torch_")):
                dists.append(e[: -len(".dist-info")])
                record = open(os.path.join(site, e, "RECORD")).read()
                if "torch/lib/libtorch_cuda_linalg.so," in record:
                    owners.append(e[: -len(".dist-info")])
        return {"dists": " ".join(dists), "linalg": content, "core": core, "owners": len(owners)}


def scenarios(tool, mono, split, both, labels, base_python, uv, work):
    slim = f"torch-cuda-linalg==2.11.0+{labels['nomagma']}"
    fat = f"torch-cuda-linalg==2.11.0+{labels['magma']}"
    rows = []

    def fresh(name):
        return Env(os.path.join(work, f"{tool}-{name}"), base_python, uv)

    def row(name, env, steps):
        out = []
        for s in steps:
            r = s(env)
            if r is not None and r.returncode != 0:
                out.append("exit %d: %s" % (r.returncode, " ".join((r.stderr or r.stdout).split())[:200]))
        st = env.state()
        rows.append((name, st["dists"], st["linalg"], st["core"], st["owners"], env.check(tool), "; ".join(out) or "ok"))

    row("default: install torch", fresh("default"), [lambda e: e.install(tool, split, "torch")])
    row("slim: install torch " + slim, fresh("slim"), [lambda e: e.install(tool, split, "torch", slim)])
    row("switch slim → magma", fresh("switch"), [lambda e: e.install(tool, split, "torch", slim), lambda e: e.install(tool, split, fat)])
    row("switch magma → slim", fresh("switch-back"), [lambda e: e.install(tool, split, "torch", fat), lambda e: e.install(tool, split, slim)])
    row("uninstall the lazy dist", fresh("uninstall"),
        [lambda e: e.install(tool, split, "torch"), lambda e: e.uninstall(tool, "torch-cuda-linalg")])
    row("mono installed, then install " + slim, fresh("mono-then-slim"),
        [lambda e: e.install(tool, mono, "torch"), lambda e: e.install(tool, split, slim)])
    row("mono installed, then install torch from split dir", fresh("mono-then-split"),
        [lambda e: e.install(tool, mono, "torch"), lambda e: e.install(tool, split, "torch")])
    row("split installed, then install torch==2.11.0 from mono dir", fresh("split-then-mono"),
        [lambda e: e.install(tool, split, "torch"), lambda e: e.install(tool, mono, "torch==2.11.0")])
    row("split installed, then --force-reinstall torch==2.11.0 from mono dir", fresh("split-then-mono-force"),
        [lambda e: e.install(tool, split, "torch"), lambda e: e.install(tool, mono, "--force-reinstall", "--no-deps", "torch==2.11.0")])
    row("both dirs offered: install torch", fresh("both"), [lambda e: e.install(tool, both, "torch")])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("python")
    ap.add_argument("--uv")
    ap.add_argument("--out")
    a = ap.parse_args()
    pip_v = subprocess.run([a.python, "-m", "pip", "--version"], capture_output=True, text=True).stdout.split()[1]
    uv_v = subprocess.run([a.uv, "--version"], capture_output=True, text=True).stdout.strip() if a.uv else None
    lines = [f"Measured by `tools/wheel-installer-facts.py` with pip {pip_v}" + (f" and {uv_v}" if uv_v else "") +
             ", fresh venvs, offline (`--no-index --find-links`). `owners` = installed distributions whose RECORD lists"
             " `torch/lib/libtorch_cuda_linalg.so`.", ""]
    schemes = {"labels magma / nomagma": {"magma": "magma", "nomagma": "nomagma"},
               "labels 1.magma / 0.nomagma": {"magma": "1.magma", "nomagma": "0.nomagma"}}
    for title, labels in schemes.items():
        with tempfile.TemporaryDirectory() as work:
            mono, split, both = build(os.path.join(work, "wheels"), labels)
            for tool in ["pip"] + (["uv"] if a.uv else []):
                lines += [f"### {tool}, {title}", "",
                          "| scenario | installed | linalg file | core file | owners | check | errors |", "|---|---|---|---|---|---|---|"]
                for r in scenarios(tool, mono, split, both, labels, a.python, a.uv, work):
                    lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
                lines.append("")
    text = "\n".join(lines)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
