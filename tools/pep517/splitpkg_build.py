"""The PEP 517 backend of `pip wheel .` / `pip install .`: maturin, with `--compatibility pypi`.

maturin's own hooks pass `--compatibility off` to `maturin pep517 build-wheel` unless
MATURIN_PEP517_ARGS or the `maturin.build-args` config setting names one, which overrides
`[tool.maturin] compatibility` and tags the wheel plain `linux_x86_64` (PyPI refuses that tag).
This module adds `--compatibility pypi` (the lowest manylinux tag the binary's GLIBC_ symbol
versions allow) when neither chooses, then calls maturin's hooks unchanged.
"""

import os

import maturin

build_sdist = maturin.build_sdist
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
prepare_metadata_for_build_wheel = maturin.prepare_metadata_for_build_wheel


def _pypi_compatibility_by_default():
    args = os.environ.get("MATURIN_PEP517_ARGS", "")
    if "--compatibility" not in args and "--manylinux" not in args:
        os.environ["MATURIN_PEP517_ARGS"] = f"{args} --compatibility pypi".strip()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _pypi_compatibility_by_default()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _pypi_compatibility_by_default()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
