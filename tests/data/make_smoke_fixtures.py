#!/usr/bin/env python3
"""Write the SYNTHETIC smoke reports under tests/data/ that tests/it/smoke.rs judges with --replay.

Not GPU runs. The case lists come from `splitpkg smoke --list --json` (so they follow the current
catalog); the raw outcomes are written by hand after the outcomes measured on an H200 with torch
2.11.0+cu130 (shared notes gpu-probe-torch-2.11-h200.md and pytorch-lazy-linalg.md §5, §10, §12):
every op runs, complex Hermitian ldl_factor fails under the cusolver preference, svd fails under
the magma preference for most shapes (pinv 32x16 passed). Residuals and times are made up.

  smoke-synthetic-ok.json      magma (real) + nomagma (emulated), as the stock wheel behaves: exit 0
  smoke-synthetic-broken.json  a broken real nomagma: MAGMA still on a default path, a wrong
                               result, a hang, a crash, a MAGMA-not-initialized message, a
                               non-RuntimeError, has_magma mismatch: exit 1

Usage: python3 tests/data/make_smoke_fixtures.py target/release/splitpkg
"""
import json
import subprocess
import sys
from pathlib import Path

OPS = ["cholesky_solve", "lu_factor", "svd", "pinv", "ldl_factor_hermitian", "eig", "matrix_exp"]
HERE = Path(__file__).resolve().parent
TORCH = "/opt/torch/.venv/lib/python3.12/site-packages/torch"
LAZY = TORCH + "/lib/libtorch_cuda_linalg.so"
COMMENT = ("SYNTHETIC fixture written by tests/data/make_smoke_fixtures.py, not a GPU run: case list from "
           "`splitpkg smoke --list`, outcomes hand-written after the H200 measurements in the shared notes "
           "(gpu-probe-torch-2.11-h200.md); residuals and times are made up.")

SVD_BUG = ("cusolver error: CUSOLVER_STATUS_INVALID_VALUE, when calling `cusolverDnDgesvdj(handle, jobz, econ, m, n, A, "
           "lda, S, U, ldu, V, ldv, work, lwork, info, params)`. This error may appear if the input matrix contains NaN.")
LDL_CUSOLVER = ("torch.linalg.ldl_factor: complex tensors with hermitian=True flag are not supported with cuSOLVER "
                "backend. Currently preferred backend is at::LinalgBackend::{}, please set 'default' or 'magma' "
                "backend with torch.backends.cuda.preferred_linalg_library")


def plan(binary, variants, emulate=()):
    args = [binary, "smoke", "--list", "--json"]
    for name in variants:
        args += ["--variant", f"{name}=/nonexistent"]
    for name in emulate:
        args += ["--emulate", name]
    for op in OPS:
        args += ["--only", op + "/"]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def ok(dtype, pref):
    single = dtype in ("float32", "complex64")
    return {"outcome": "ok", "residual": 3.1e-7 if single else 4.4e-15, "time_ms": 1.7,
            "preference_after": pref, "context_ok": True}


def err(text, pref, phase="op", type_="RuntimeError", runtime=True):
    return {"outcome": "error", "phase": phase, "error_type": type_, "runtime_error": runtime, "error": text,
            "time_ms": 0.4, "preference_after": pref, "context_ok": True}


def probe(has_magma, cuda="13.0"):
    return {"import_ok": True, "python": "3.12.3", "lazy_name": "libtorch_cuda_linalg.so",
            "torch_version": "2.11.0+cu130", "torch_file": TORCH + "/__init__.py", "cuda_version": cuda,
            "has_magma": has_magma, "preference_at_start": "default", "config_magma": ["- Magma 2.6.1"],
            "mapped_after_import": None, "cuda_available": True, "device_name": "NVIDIA H200",
            "capability": [9, 0], "mapped_after_cuda_init": None, "mapped_after_matmul": None,
            "first_linalg_ok": True, "mapped_after_linalg": LAZY, "device_memory_growth_mib": 194.0}


def lazy(has):
    if has:
        return {"path": LAZY, "size": 53532193, "has_magma": True,
                "evidence": "defines 1193 magma symbols (e.g. magma_cgeev)", "defined_symbols": 1193}
    return {"path": LAZY, "size": 1480000, "has_magma": False,
            "evidence": "no magma symbols defined and no magma library NEEDed", "defined_symbols": 0}


def case_entry(pc, raw, i):
    case = {k: v for k, v in pc.items() if k != "expect"}
    # expect/status are placeholders: --replay judges every case again.
    return dict(case, seed=1000 + i, expect={"outcome": "pass", "rule": "recorded"}, tolerance=0.0,
                raw=raw, status="pass")


def variant(name, mode, table, cases, probe_v, lazy_v, base):
    return {"name": name, "path": TORCH, "mode": mode, "emulated": mode != "real", "table": table,
            "table_origin": "built-in", "python": "python3", "layout": "torch-dir", "torch_dir": TORCH,
            "probe": probe_v, "lazy_library": lazy_v,
            "checks": [{"name": "device_code", "status": "not-checked",
                        "detail": "not checked (fatbin reader unavailable)"}],
            "cases": cases, "summary": {"cases": 0, "pass": 0, "fail": 0, "expected_fail": 0, "timeout": 0,
                                        "excluded": 0, "checks_failed": 0, "ok": False}}


def report(variants):
    return {"comment": COMMENT, "schema": "splitpkg-smoke", "schema_version": 1,
            "tool": {"name": "splitpkg", "version": "0.1.0"},
            "command": ["splitpkg", "smoke", "(synthetic)"], "seed": 42,
            "options": {"case_timeout_s": 60.0, "bench": False, "bench_reps": 5, "lazy": "libtorch_cuda_linalg.so"},
            "tolerances": {}, "device": {"ordinal": 0, "count": 1, "driver_version": 13000, "driver_cuda": "13.0",
                                          "name": "NVIDIA H200", "compute_capability": "9.0", "sm": "sm_90"},
            "variants": variants, "bench": None,
            "summary": {"cases": 0, "pass": 0, "fail": 0, "expected_fail": 0, "timeout": 0, "excluded": 0,
                        "checks_failed": 0, "ok": False}}


def stock_magma_raw(pc):
    """What the stock wheel does (H200 measurements)."""
    op, pref, dtype, shape = pc["op"], pc["preference"], pc["dtype"], pc["shape"]
    if op == "ldl_factor_hermitian" and pref == "cusolver":
        return err(LDL_CUSOLVER.format("Cusolver"), "default")
    if op == "svd" and pref == "magma":
        return err(SVD_BUG, "default", type_="_LinAlgError")
    if op == "pinv" and pref == "magma" and shape == "256x128":
        return err(SVD_BUG, "default", type_="_LinAlgError")
    return ok(dtype, "default")


def emulated_raw(pc):
    if pc["op"] == "ldl_factor_hermitian":
        return err(LDL_CUSOLVER.format("Cusolver"), "cusolver")
    return ok(pc["dtype"], "cusolver")


def broken_nomagma_raw(pc):
    op, pref, dtype, shape = pc["op"], pc["preference"], pc["dtype"], pc["shape"]
    if pref == "magma":
        if op in ("svd", "pinv"):
            return err(SVD_BUG, "default", type_="_LinAlgError")
        if op == "lu_factor" and dtype == "float32" and shape == "64x64":
            return err("linalg.lu_factor: PyTorch was not compiled with MAGMA support.", "default",
                       type_="TypeError", runtime=False)
        if op in ("eig", "matrix_exp"):
            return ok(dtype, "default") if op == "matrix_exp" else err(
                "Calling torch.linalg.eig with MAGMA requires compiling PyTorch with MAGMA.", "default")
        return err(f"{op}: MAGMA library not found in compilation. Please rebuild with MAGMA.", "default")
    if op == "ldl_factor_hermitian":
        return err(LDL_CUSOLVER.format("Default" if pref == "default" else "Cusolver"), "default")
    if op == "cholesky_solve" and pref == "default" and "magma-by-default" in pc["tags"]:
        # the library still takes MAGMA's default branch: the failure this smoke test exists for
        return err("cholesky_solve: MAGMA library not found in compilation. Please rebuild with MAGMA.", "default")
    if op == "lu_factor" and shape == "300x200" and dtype == "float64" and pref == "default":
        return dict(ok(dtype, "default"), residual=0.83)
    if op == "lu_factor" and shape == "64x96" and dtype == "complex64" and pref == "cusolver":
        return dict(ok(dtype, "default"), residual="nan")
    if op == "svd" and pref == "default" and shape == "64x32":
        return {"outcome": "timeout", "time_ms": 60000.0,
                "detail": "no answer within 60s; process group killed"}
    if op == "svd" and pref == "default":
        return {"outcome": "not-run", "detail": "svd timed out 2 times already in this variant"} \
            if shape in ("256x128", "16x48") else {"outcome": "timeout", "time_ms": 60000.0,
                                                   "detail": "no answer within 60s; process group killed"}
    if op == "eig" and shape == "32x32" and dtype == "float64" and pref == "cusolver":
        return {"outcome": "crash", "time_ms": 12.0, "detail": "killed by signal 11 (SIGSEGV); last output: none"}
    if op == "matrix_exp" and dtype == "float32" and pref == "default":
        return dict(ok(dtype, "default"),
                    stderr="Error in magma_getdevice_arch: MAGMA not initialized (call magma_init() first) or bad device\n")
    return ok(dtype, "default")


def main():
    binary = sys.argv[1]
    magma, nomagma_emu = plan(binary, ["magma", "nomagma"], emulate=["nomagma"])
    ok_report = report([
        variant("magma", "real", "magma", [case_entry(pc, stock_magma_raw(pc), i) for i, pc in enumerate(magma["cases"])],
                probe(True), lazy(True), "default"),
        variant("nomagma", "emulated-nomagma", "nomagma-emulated",
                [case_entry(pc, emulated_raw(pc), i) for i, pc in enumerate(nomagma_emu["cases"])],
                dict(probe(True), prefer_cusolver_env="1", preference_at_start="cusolver"), lazy(True), "cusolver"),
    ])
    ok_report["variants"][1]["note"] = "EMULATED (synthetic)"
    (nomagma,) = plan(binary, ["nomagma"])
    broken = report([
        variant("nomagma", "real", "nomagma",
                [case_entry(pc, broken_nomagma_raw(pc), i) for i, pc in enumerate(nomagma["cases"])],
                probe(True), lazy(False), "default"),
    ])
    for name, rep in [("smoke-synthetic-ok.json", ok_report), ("smoke-synthetic-broken.json", broken)]:
        (HERE / name).write_text(json.dumps(rep, indent=1) + "\n")
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
