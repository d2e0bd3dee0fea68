#!/usr/bin/env python3
"""Validate PEP 825 variant wheels and `{name}-{version}-variants.json` files in a directory
with variantlib, the reference implementation.

Usage: python3 tools/check-variant-wheels.py DIR

Run it with a Python that has the pinned variantlib (nothing else is needed; offline once installed):

    python3 -m venv /tmp/vl && /tmp/vl/bin/pip install 'variantlib==0.2.2'
    /tmp/vl/bin/python tools/check-variant-wheels.py DIR

variantlib 0.2.2 implements variant metadata format 0.2.0, `$schema`
https://variants-schema.wheelnext.dev/v0.2.0.json (PEP 825 package format plus the providers /
`static-properties` extension). That is the schema this script pins (taken from variantlib's
own `VARIANT_INFO_SCHEMA_URL`).

For every `*-variants.json` and every `*.whl` in DIR it prints one line, `ok FILE` or
`FAIL FILE: reason`, and exits 1 if any line is FAIL (2 on usage errors / wrong variantlib).

What is checked, with variantlib's own code doing the parsing and validation:
  - file names: `variantlib.constants.VALIDATION_WHEEL_NAME_REGEX` (wheel name, optional variant
    label `[0-9a-z._]+` after the platform tag);
  - `*.dist-info/variant.json` of a variant wheel: `VariantDistInfo(data, expected_label=label)`
    (schema of keys and values, namespaces/features/values, providers listed for every namespace,
    exactly one variant, its label equal to the label in the file name, `null` only for the
    null variant);
  - `*-variants.json`: `VariantsJson(data)` (same validation, any number of variants);
  - `$schema` equal to variantlib's `VARIANT_INFO_SCHEMA_URL` (variantlib itself does not look at it);
  - each variant wheel has a `{namever}-variants.json` in DIR that lists its label, and
    `VariantsJson.merge()` of the wheel's metadata into the index file raises no inconsistency
    (same properties for the label, compatible `default-priorities`, same `providers`);
  - no two labels of one variants.json describe the same properties (variant hash,
    `VariantDescription.hexdigest`; `variantlib generate-index-json` reports this as an error);
  - a non-variant wheel is reported `ok` (noting it if it carries a variant.json, which installers
    ignore for non-variant wheels).
For a variants.json whose providers are all static, the `ok` line also shows the default
preference order from `variantlib.api.get_variants_by_priority` (`null` is variantlib's implicit
null-variant fallback, always last).
"""
import copy
import json
import logging
import os
import re
import sys
import zipfile

PINNED_VARIANTLIB = "0.2.2"

try:
    from importlib.metadata import version as _dist_version

    from variantlib.api import get_variants_by_priority
    from variantlib.constants import (
        VALIDATION_WHEEL_NAME_REGEX,
        VARIANT_DIST_INFO_FILENAME,
        VARIANT_INFO_SCHEMA_KEY,
        VARIANT_INFO_SCHEMA_URL,
    )
    from variantlib.errors import ValidationError
    from variantlib.variant_dist_info import VariantDistInfo
    from variantlib.variants_json import VariantsJson
except ImportError as e:  # pragma: no cover
    print(f"error: variantlib not importable ({e}); pip install 'variantlib=={PINNED_VARIANTLIB}'", file=sys.stderr)
    sys.exit(2)

# variantlib logs a traceback for every failed validator before raising ValidationError; the
# raised error is what this script reports, so keep its log quiet.
logging.getLogger("variantlib").addHandler(logging.NullHandler())
logging.getLogger("variantlib").propagate = False

VARIANTS_JSON_RE = re.compile(r"(?P<namever>(?P<name>[^-]+)-(?P<ver>[^-]+))-variants\.json")


class Fail(Exception):
    pass


def load_json(data, what):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise Fail(f"{what}: not valid JSON: {e}")


def check_schema(obj, what):
    got = obj.get(VARIANT_INFO_SCHEMA_KEY) if isinstance(obj, dict) else None
    if got != VARIANT_INFO_SCHEMA_URL:
        raise Fail(f"{what}: {VARIANT_INFO_SCHEMA_KEY} is {got!r}, expected {VARIANT_INFO_SCHEMA_URL!r}")


def check_normalized_namever(name, ver, fn):
    """{name}-{version} must be normalized as in wheel file names (binary distribution format spec)."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    want_name = canonicalize_name(name).replace("-", "_")
    if name != want_name:
        raise Fail(f"name part {name!r} is not normalized (expected {want_name!r})")
    try:
        want_ver = str(Version(ver))
    except InvalidVersion:
        raise Fail(f"version part {ver!r} is not a valid version")
    if ver != want_ver:
        raise Fail(f"version part {ver!r} is not normalized (expected {want_ver!r})")


def read_variant_json(path):
    """Return (dist-info dir, bytes) of the wheel's top-level *.dist-info/variant.json, or (None, None)."""
    try:
        with zipfile.ZipFile(path) as z:
            found = []
            for name in z.namelist():
                parts = name.split("/")
                if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == VARIANT_DIST_INFO_FILENAME:
                    found.append(name)
            if len(found) > 1:
                raise Fail(f"more than one {VARIANT_DIST_INFO_FILENAME}: {found}")
            if not found:
                return None, None
            return found[0].split("/")[0], z.read(found[0])
    except zipfile.BadZipFile as e:
        raise Fail(f"not a zip file: {e}")


def check_variants_json(path):
    fn = os.path.basename(path)
    m = VARIANTS_JSON_RE.fullmatch(fn)
    if not m:
        raise Fail("file name is not {name}-{version}-variants.json")
    check_normalized_namever(m["name"], m["ver"], fn)
    with open(path, "rb") as f:
        obj = load_json(f.read(), fn)
    check_schema(obj, fn)
    try:
        vj = VariantsJson(obj)
    except ValidationError as e:
        raise Fail(f"variantlib rejects it: {e}")
    if not vj.variants:
        raise Fail("variants is empty")
    by_hash = {}
    for label, vdesc in vj.variants.items():
        by_hash.setdefault(vdesc.hexdigest, []).append(label)
    dups = [sorted(ls) for ls in by_hash.values() if len(ls) > 1]
    if dups:
        raise Fail(f"labels with identical properties: {dups}")
    note = ""
    if all(p.static_properties for p in vj.providers.values()):
        try:
            order = [v.label for v in get_variants_by_priority(variants_json=copy.deepcopy(obj))]
            note = f" (preference: {' > '.join(order)})"
        except Exception as e:  # ordering is informational only
            note = f" (preference not computed: {e})"
    return m["namever"], obj, note


def check_wheel(path, index_files):
    fn = os.path.basename(path)
    m = VALIDATION_WHEEL_NAME_REGEX.fullmatch(fn)
    if not m:
        raise Fail("not a valid (variant) wheel file name per variantlib VALIDATION_WHEEL_NAME_REGEX")
    label = m["variant_label"]
    distinfo, data = read_variant_json(path)
    if label is None:
        if data is not None:
            return " (non-variant wheel; note: it carries a variant.json, which is ignored for non-variant wheels)"
        return " (non-variant wheel)"
    check_normalized_namever(m["name"], m["ver"], fn)
    if data is None:
        raise Fail(f"variant wheel without *.dist-info/{VARIANT_DIST_INFO_FILENAME}")
    if distinfo != f"{m['namever']}.dist-info":
        raise Fail(f"{VARIANT_DIST_INFO_FILENAME} is in {distinfo}/, expected {m['namever']}.dist-info/")
    obj = load_json(data, VARIANT_DIST_INFO_FILENAME)
    check_schema(obj, VARIANT_DIST_INFO_FILENAME)
    try:
        vdi = VariantDistInfo(data, expected_label=label)
    except ValidationError as e:
        raise Fail(f"variantlib rejects {VARIANT_DIST_INFO_FILENAME}: {e}")
    index = index_files.get(m["namever"])
    if index is None:
        raise Fail(f"no valid {m['namever']}-variants.json in the directory")
    vj = VariantsJson(copy.deepcopy(index))
    if label not in vj.variants:
        raise Fail(f"{m['namever']}-variants.json does not list label {label!r}")
    try:
        vj.merge(vdi)
    except ValidationError as e:
        raise Fail(f"inconsistent with {m['namever']}-variants.json: {e}")
    props = ", ".join(p.to_str() for p in vdi.variant_desc.properties) or "null variant"
    return f" (label {label}: {props})"


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    have = _dist_version("variantlib")
    if have != PINNED_VARIANTLIB:
        print(f"error: variantlib {have} installed, this check is pinned to {PINNED_VARIANTLIB}", file=sys.stderr)
        return 2
    d = argv[1]
    names = sorted(os.listdir(d))
    failed = False
    index_files = {}
    for fn in names:
        if not fn.endswith("-variants.json"):
            continue
        try:
            namever, obj, note = check_variants_json(os.path.join(d, fn))
            index_files[namever] = obj
            print(f"ok {fn}{note}")
        except Fail as e:
            failed = True
            print(f"FAIL {fn}: {e}")
    for fn in names:
        if not fn.endswith(".whl"):
            continue
        try:
            note = check_wheel(os.path.join(d, fn), index_files)
            print(f"ok {fn}{note}")
        except Fail as e:
            failed = True
            print(f"FAIL {fn}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
