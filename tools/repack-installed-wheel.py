#!/usr/bin/env python3
"""Rebuild a wheel from an installed distribution, for machines that have the install but not the
wheel (the GPU machine has torch 2.11 installed and no network).

Usage: repack-installed-wheel.py DIST SITE OUT_DIR

DIST is the distribution name (torch), SITE the site-packages that holds `DIST-*.dist-info`.
The wheel is made from the files the install's own RECORD lists inside SITE, each checked
against its RECORD hash first (a file changed since install is an error, not repacked):
  - left out: what the installer made, not the wheel (`INSTALLER`, `REQUESTED`,
    `direct_url.json`, `__pycache__/*.pyc` it compiled, files outside SITE such as console
    scripts, which pip writes from `entry_points.txt` anyway);
  - RECORD written fresh (sha256 + size of every member), WHEEL kept, so the tags are the
    install's; the file name is `{name}-{version}-{tag}.whl` from them.
Members are stored (ZIP_STORED): nothing is deflated, so a 1.5 GB install repacks in seconds;
stored members are as valid in a wheel as deflated ones.

Prints the wheel's path. Exit 1 when a file does not match RECORD, 2 on usage errors.
This is a re-packed wheel, not the publisher's: say so wherever its results are shown.
"""
import base64
import csv
import hashlib
import io
import os
import re
import sys
import zipfile

SKIP_DIST_INFO = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def fail(code, msg):
    print(f"repack-installed-wheel: {msg}", file=sys.stderr)
    sys.exit(code)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode(), os.path.getsize(path)


def main():
    if len(sys.argv) != 4:
        fail(2, "usage: repack-installed-wheel.py DIST SITE OUT_DIR")
    dist, site, out = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
    norm = re.sub(r"[-_.]+", "_", dist).lower()
    infos = [d for d in os.listdir(site) if d.endswith(".dist-info") and d.split("-")[0].lower() == norm]
    if len(infos) != 1:
        fail(2, f"{site}: expected one {dist} dist-info, found {infos}")
    info = infos[0]
    with open(os.path.join(site, info, "WHEEL")) as f:
        tags = [l.split(":", 1)[1].strip() for l in f if l.startswith("Tag:")]
    with open(os.path.join(site, info, "METADATA")) as f:
        version = next(l.split(":", 1)[1].strip() for l in f if l.startswith("Version:"))
    if not tags:
        fail(2, f"{info}/WHEEL: no Tag")
    members = []
    with open(os.path.join(site, info, "RECORD"), newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            path, hash_, _size = row[0], row[1], row[2]
            full = os.path.realpath(os.path.join(site, path))
            if not full.startswith(site + os.sep):
                continue  # console scripts and data outside site-packages
            if "__pycache__/" in path or path.endswith(".pyc"):
                continue
            if path.startswith(info + "/") and path[len(info) + 1 :] in SKIP_DIST_INFO:
                continue
            if hash_:
                got, _ = digest(full)
                if got != hash_:
                    fail(1, f"{full}: changed since install (RECORD says {hash_}, file is {got})")
            members.append(path)
    members.sort()
    # One tag set per wheel name: compress a multi-tag WHEEL the way wheel file names do.
    py = ".".join(sorted({t.split("-")[0] for t in tags}))
    abi = ".".join(sorted({t.split("-")[1] for t in tags}))
    plat = ".".join(sorted({t.split("-")[2] for t in tags}))
    name = f"{norm}-{version}-{py}-{abi}-{plat}.whl"
    os.makedirs(out, exist_ok=True)
    dest = os.path.join(out, name)
    tmp = dest + ".tmp"
    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for path in members:
            full = os.path.join(site, path)
            zi = zipfile.ZipInfo.from_file(full, path)
            zi.date_time = (1980, 1, 1, 0, 0, 0)
            zi.compress_type = zipfile.ZIP_STORED
            with open(full, "rb") as src, z.open(zi, "w", force_zip64=zi.file_size >= 1 << 31) as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            h, n = digest(full)
            w.writerow([path, h, n])
        w.writerow([f"{info}/RECORD", "", ""])
        zi = zipfile.ZipInfo(f"{info}/RECORD", (1980, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        z.writestr(zi, rows.getvalue())
    os.replace(tmp, dest)
    print(dest)


if __name__ == "__main__":
    main()
