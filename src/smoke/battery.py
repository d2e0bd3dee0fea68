#!/usr/bin/env python3
"""splitpkg smoke battery: runs CUDA linear-algebra cases in one PyTorch installation.

Shipped inside the splitpkg binary and written to a temporary directory at run time. splitpkg
plans the cases and judges the results; this script only executes what it is told and reports
raw facts (outcome, residual, error text, time, stderr). Modes:

  probe  --lazy NAME        one JSON object: torch/CUDA facts, has_magma, and whether NAME is mapped
                            in /proc/self/maps after import, after a CUDA matmul, after a cholesky.
  worker --base-pref PREF   reads one JSON case per line on stdin, answers one line per case on
                            stdout, prefixed with MARK. Each case: set the preference, build random
                            inputs from the case seed on the CPU, run the op on cuda:0, check the
                            result against a CPU float64/complex128 reference, reset the preference.
  selftest                  checks the pure helpers (no torch needed); used by splitpkg's tests.

Residuals are relative and computed on the CPU in float64/complex128 from the GPU outputs. For a
batch the worst matrix counts. Inputs are built with controlled conditioning (singular values or
eigenvalue magnitudes in [1/2, 2]) so the tolerances can be tight; see docs/smoke.md.
"""

import json
import math
import os
import sys
import time
import traceback

MARK = "@@SPLITPKG-SMOKE@@ "
MAGMA_NOT_INIT = "MAGMA not initialized"


# ----------------------------------------------------------------------------- pure helpers
# (no torch: exercised by `battery.py selftest` in CI)

def greedy_match_error(ref, got):
    """Largest distance between two multisets of complex numbers after greedy nearest matching.

    Eigenvalues come back in no particular order; each reference eigenvalue (largest modulus
    first) takes the nearest unused computed one. Returns inf when the sizes differ."""
    ref = [complex(x) for x in ref]
    got = [complex(x) for x in got]
    if len(ref) != len(got):
        return math.inf
    unused = list(range(len(got)))
    worst = 0.0
    for r in sorted(ref, key=lambda z: -abs(z)):
        best = min(unused, key=lambda j: abs(got[j] - r))
        worst = max(worst, abs(got[best] - r))
        unused.remove(best)
    return worst


def first_line(text, limit=300):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def finite_or_none(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def encode(obj):
    """One protocol line. Non-finite residuals are sent as strings so the line stays JSON."""
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return MARK + json.dumps(fix(obj), sort_keys=True)


def decode(line):
    if not line.startswith(MARK):
        return None
    return json.loads(line[len(MARK):])


def selftest():
    assert greedy_match_error([1, 2, 3j], [3j, 2, 1]) == 0.0
    assert abs(greedy_match_error([1, 2], [1.5, 2]) - 0.5) < 1e-12
    assert greedy_match_error([1, 2], [1]) == math.inf
    # a duplicate cannot stand in for two distinct eigenvalues
    assert abs(greedy_match_error([1, -1], [1, 1]) - 2.0) < 1e-12
    assert first_line("\n  RuntimeError: x\nmore") == "RuntimeError: x"
    assert finite_or_none("nan") is None and finite_or_none(2) == 2.0
    line = encode({"residual": float("nan"), "id": "a"})
    assert decode(line) == {"id": "a", "residual": "nan"}
    assert decode("torch printed this") is None
    assert pref_name("_LinalgBackend.Cusolver") == "cusolver"
    assert pref_name("torch._C._LinalgBackend.Default") == "default"
    assert pref_name("LinalgBackend.Magma") == "magma"
    print("selftest ok")


# ----------------------------------------------------------------------------- torch parts

torch = None


def import_torch():
    global torch
    import torch as _torch  # noqa: PLC0415 - imported late on purpose (probe watches the maps)
    torch = _torch


def maps_path(name):
    """The mapped path of a library named `name` in this process, or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6:
                path = parts[5].strip()
                if os.path.basename(path) == name or os.path.basename(path).startswith(name + "."):
                    return path
    return None


def ref_dtype(dtype):
    return torch.complex128 if dtype.is_complex else torch.float64


DTYPES = {
    "float32": lambda: torch.float32,
    "float64": lambda: torch.float64,
    "complex64": lambda: torch.complex64,
    "complex128": lambda: torch.complex128,
}


class Inputs:
    """Random master inputs in float64/complex128 on the CPU, built from the case seed."""

    def __init__(self, seed, dtype):
        self.gen = torch.Generator().manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
        self.dtype = dtype
        self.rdt = ref_dtype(dtype)

    def randn(self, *shape):
        return torch.randn(*shape, dtype=self.rdt, generator=self.gen)

    def uniform(self, *shape):
        return torch.rand(*shape, dtype=torch.float64, generator=self.gen)

    def svals(self, b, k):
        # log-uniform in [1/2, 2]: condition number at most 4
        return torch.exp((self.uniform(*b, k) * 2 - 1) * math.log(2.0))

    def unitary(self, b, n):
        q, r = torch.linalg.qr(self.randn(*b, n, n))
        d = torch.diagonal(r, dim1=-2, dim2=-1)
        phase = d / d.abs().clamp_min(1e-300)
        return q * phase.unsqueeze(-2)

    def general(self, b, m, n):
        k = min(m, n)
        u = self.unitary(b, m)[..., :, :k]
        v = self.unitary(b, n)[..., :, :k]
        return (u * self.svals(b, k).to(self.rdt).unsqueeze(-2)) @ v.mH

    def general_square(self, b, n):
        return self.general(b, n, n)

    def signs(self, b, n):
        s = 1.0 - 2.0 * (self.uniform(*b, n) < 0.5).to(torch.float64)
        s[..., 0] = 1.0
        s[..., -1] = -1.0
        return s

    def spd(self, b, n):
        q = self.unitary(b, n)
        return (q * self.svals(b, n).to(self.rdt).unsqueeze(-2)) @ q.mH

    def hermitian_indefinite(self, b, n):
        q = self.unitary(b, n)
        d = (self.svals(b, n) * self.signs(b, n)).to(self.rdt)
        return (q * d.unsqueeze(-2)) @ q.mH

    def symmetric_indefinite(self, b, n):
        """Complex symmetric (A = Aᵀ, not Hermitian) for complex dtypes, real symmetric otherwise."""
        q = self.unitary(b, n)
        d = (self.svals(b, n) * self.signs(b, n)).to(self.rdt)
        return (q * d.unsqueeze(-2)) @ q.mT

    def ldl_input(self, b, n, hermitian):
        """Indefinite Hermitian (or symmetric) and strongly diagonally dominant: eigenvalues near
        ±[1, 2], and Bunch-Kaufman takes every pivot 1x1 without interchange, so the factors can be
        checked by reconstruction as well as through a solve."""
        d = ((1 + self.uniform(*b, n)) * self.signs(b, n)).to(self.rdt)
        e = self.randn(*b, n, n) / (4 * n)
        e = (e + e.mH) / 2 if hermitian else (e + e.mT) / 2
        e = e - torch.diag_embed(torch.diagonal(e, dim1=-2, dim2=-1))
        return torch.diag_embed(d) + e

    def diag_dominant(self, b, n):
        eye = torch.eye(n, dtype=self.rdt)
        return self.randn(*b, n, n) / n + eye

    def triangular(self, b, n, upper):
        t = self.randn(*b, n, n) / n
        t = torch.triu(t, 1) if upper else torch.tril(t, -1)
        d = ((1 + self.uniform(*b, n)) * self.signs(b, n)).to(self.rdt)
        return t + torch.diag_embed(d)

    def low_rank(self, b, m, n, r):
        u = self.unitary(b, m)[..., :, :r]
        v = self.unitary(b, n)[..., :, :r]
        return (u * self.svals(b, r).to(self.rdt).unsqueeze(-2)) @ v.mH

    def cast(self, t):
        """What the GPU gets (rounded to the case dtype) and the same values in the reference dtype."""
        low = t.to(self.dtype)
        return low, low.to(self.rdt)


def rel(x, ref, item_dims=2):
    """Worst relative error over the batch: ‖x − ref‖ / ‖ref‖ per item (Frobenius for matrices)."""
    x = x.to(ref.dtype)
    if item_dims == 0:
        num = (x - ref).abs().reshape(-1)
        den = ref.abs().reshape(-1)
    else:
        num = (x - ref).reshape(*ref.shape[: ref.dim() - item_dims], -1).norm(dim=-1).reshape(-1)
        den = ref.reshape(*ref.shape[: ref.dim() - item_dims], -1).norm(dim=-1).reshape(-1)
    return float((num / den.clamp_min(1e-300)).max())


def orth(q):
    """‖QᴴQ − I‖_F / √k: how far the columns of Q are from orthonormal."""
    k = q.shape[-1]
    eye = torch.eye(k, dtype=q.dtype)
    return float(((q.mH @ q - eye).reshape(*q.shape[:-2], -1).norm(dim=-1) / math.sqrt(k)).max())


def worst(*values):
    out = 0.0
    for v in values:
        v = float(v)
        if math.isnan(v):
            return math.nan
        out = max(out, v)
    return out


def cpu(t):
    return t.detach().to("cpu")


# Each op: build(inp, p) -> (gpu_args dict, ref dict); run(args, p) -> outputs; check(outs, ref, p) -> residual.
# `p` holds the case parameters: b (batch dims), n, m, k, r, and op options.

OPS = {}


def _b(p):
    return tuple(p.get("b", []))


def _mn(p):
    return p.get("m", p["n"]), p["n"]


def build_square(kind):
    def build(inp, p):
        a_low, a_ref = inp.cast(getattr(inp, kind)(_b(p), p["n"]))
        return {"A": a_low}, {"A": a_ref}
    return build


def build_general(inp, p):
    m, n = _mn(p)
    a_low, a_ref = inp.cast(inp.general(_b(p), m, n))
    return {"A": a_low}, {"A": a_ref}


def build_system(kind):
    def build(inp, p):
        b, n, k = _b(p), p["n"], p.get("k", 1)
        a_low, a_ref = inp.cast(getattr(inp, kind)(b, n))
        b_low, b_ref = inp.cast(inp.randn(*b, n, k))
        return {"A": a_low, "B": b_low}, {"A": a_ref, "B": b_ref}
    return build


# cholesky ---------------------------------------------------------------------------------
def _cholesky_check(o, ref, p):
    return rel(o, torch.linalg.cholesky(ref["A"]))


OPS["cholesky"] = (build_square("spd"), lambda a, p: torch.linalg.cholesky(a["A"]), _cholesky_check)


def _chol_factor_build(inp, p):
    b, n, k = _b(p), p["n"], p.get("k", 1)
    l_master = torch.linalg.cholesky(inp.spd(b, n))
    l_low, l_ref = inp.cast(l_master)
    b_low, b_ref = inp.cast(inp.randn(*b, n, k))
    return {"L": l_low, "B": b_low}, {"L": l_ref, "B": b_ref}


OPS["cholesky_solve"] = (
    _chol_factor_build,
    lambda a, p: torch.cholesky_solve(a["B"], a["L"]),
    lambda o, ref, p: rel(o, torch.cholesky_solve(ref["B"], ref["L"])),
)
OPS["cholesky_inverse"] = (
    _chol_factor_build,
    lambda a, p: torch.cholesky_inverse(a["L"]),
    lambda o, ref, p: rel(o, torch.cholesky_inverse(ref["L"])),
)


# LU ---------------------------------------------------------------------------------------
def _lu_factor_check(o, ref, p):
    lu, piv = cpu(o[0]), cpu(o[1])
    pm, lm, um = torch.lu_unpack(lu.to(ref["A"].dtype), piv)
    return rel(pm @ lm @ um, ref["A"])


OPS["lu_factor"] = (build_general, lambda a, p: torch.linalg.lu_factor(a["A"]), _lu_factor_check)


def _lu_nopiv_build(inp, p):
    a_low, a_ref = inp.cast(inp.diag_dominant(_b(p), p["n"]))
    return {"A": a_low}, {"A": a_ref}


def _lu_nopiv_check(o, ref, p):
    lu = cpu(o[0]).to(ref["A"].dtype)
    n = lu.shape[-1]
    eye = torch.eye(n, dtype=lu.dtype)
    return rel((torch.tril(lu, -1) + eye) @ torch.triu(lu), ref["A"])


OPS["lu_factor_nopiv"] = (_lu_nopiv_build, lambda a, p: torch.linalg.lu_factor(a["A"], pivot=False), _lu_nopiv_check)


def _lu_check(o, ref, p):
    pm, lm, um = (cpu(t).to(ref["A"].dtype) for t in o)
    return rel(pm @ lm @ um, ref["A"])


OPS["lu"] = (build_general, lambda a, p: torch.linalg.lu(a["A"]), _lu_check)


def _lu_solve_build(inp, p):
    b, n, k = _b(p), p["n"], p.get("k", 1)
    lu_m, piv = torch.linalg.lu_factor(inp.general(b, n, n))
    lu_low, lu_ref = inp.cast(lu_m)
    b_low, b_ref = inp.cast(inp.randn(*b, n, k))
    return {"LU": lu_low, "piv": piv, "B": b_low}, {"LU": lu_ref, "piv": piv, "B": b_ref}


OPS["lu_solve"] = (
    _lu_solve_build,
    lambda a, p: torch.linalg.lu_solve(a["LU"], a["piv"], a["B"]),
    lambda o, ref, p: rel(o, torch.linalg.lu_solve(ref["LU"], ref["piv"], ref["B"])),
)
OPS["solve"] = (
    build_system("general_square"),
    lambda a, p: torch.linalg.solve(a["A"], a["B"]),
    lambda o, ref, p: rel(o, torch.linalg.solve(ref["A"], ref["B"])),
)


def build_general_square(inp, p):
    a_low, a_ref = inp.cast(inp.general(_b(p), p["n"], p["n"]))
    return {"A": a_low}, {"A": a_ref}


OPS["inv"] = (
    build_general_square,
    lambda a, p: torch.linalg.inv(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.inv(ref["A"])),
)
OPS["det"] = (
    build_general_square,
    lambda a, p: torch.linalg.det(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.det(ref["A"]), item_dims=0),
)


def _slogdet_check(o, ref, p):
    sign, logabs = (cpu(t) for t in o)
    rsign, rlogabs = torch.linalg.slogdet(ref["A"])
    return worst((sign.to(rsign.dtype) - rsign).abs().max(), (logabs.to(rlogabs.dtype) - rlogabs).abs().max())


OPS["slogdet"] = (build_general_square, lambda a, p: torch.linalg.slogdet(a["A"]), _slogdet_check)


# QR family --------------------------------------------------------------------------------
def _qr_check(o, ref, p):
    q, r = (cpu(t).to(ref["A"].dtype) for t in o)
    below = torch.tril(r, -1).reshape(-1).norm() / r.reshape(-1).norm().clamp_min(1e-300)
    return worst(rel(q @ r, ref["A"]), orth(q), below)


OPS["qr"] = (build_general, lambda a, p: torch.linalg.qr(a["A"]), _qr_check)


def _geqrf_check(o, ref, p):
    a, tau = (cpu(t).to(ref["A"].dtype) for t in o)
    n = a.shape[-1]
    q = torch.linalg.householder_product(a, tau)
    r = torch.triu(a[..., :n, :])
    return worst(rel(q @ r, ref["A"]), orth(q))


OPS["geqrf"] = (build_general, lambda a, p: torch.geqrf(a["A"]), _geqrf_check)


def _householder_build(inp, p):
    m, n = _mn(p)
    a_m, tau_m = torch.geqrf(inp.general(_b(p), m, n))
    a_low, a_ref = inp.cast(a_m)
    t_low, t_ref = inp.cast(tau_m)
    out = {"a": a_low, "tau": t_low}, {"a": a_ref, "tau": t_ref}
    if p.get("k"):
        c_low, c_ref = inp.cast(inp.randn(*_b(p), m, p["k"]))
        out[0]["C"], out[1]["C"] = c_low, c_ref
    return out


OPS["householder_product"] = (
    _householder_build,
    lambda a, p: torch.linalg.householder_product(a["a"], a["tau"]),
    lambda o, ref, p: rel(o, torch.linalg.householder_product(ref["a"], ref["tau"])),
)
OPS["ormqr"] = (
    _householder_build,
    lambda a, p: torch.ormqr(a["a"], a["tau"], a["C"], left=True, transpose=bool(p.get("transpose"))),
    lambda o, ref, p: rel(o, torch.ormqr(ref["a"], ref["tau"], ref["C"], left=True, transpose=bool(p.get("transpose")))),
)


# eigenproblems ----------------------------------------------------------------------------
def _eigh_check(o, ref, p):
    w, v = cpu(o[0]), cpu(o[1]).to(ref["A"].dtype)
    a = ref["A"]
    wr = torch.linalg.eigvalsh(a)
    av = a @ v - v * w.to(a.dtype).unsqueeze(-2)
    anorm = a.reshape(*a.shape[:-2], -1).norm(dim=-1).reshape(-1)
    resid = (av.reshape(*av.shape[:-2], -1).norm(dim=-1).reshape(-1) / anorm).max()
    return worst(rel(w.to(wr.dtype), wr, item_dims=1), resid, orth(v))


OPS["eigh"] = (build_square("hermitian_indefinite"), lambda a, p: torch.linalg.eigh(a["A"]), _eigh_check)
OPS["eigvalsh"] = (
    build_square("hermitian_indefinite"),
    lambda a, p: torch.linalg.eigvalsh(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.eigvalsh(ref["A"]), item_dims=1),
)


def _eigvals_match(w, a):
    """Greedy-matched eigenvalue error relative to ‖A‖₂, worst over the batch."""
    n = a.shape[-1]
    wr = torch.linalg.eigvals(a).reshape(-1, n)
    w = w.reshape(-1, n).to(torch.complex128)
    norms = torch.linalg.matrix_norm(a, ord=2).reshape(-1)
    return max(greedy_match_error(wr[i].tolist(), w[i].tolist()) / float(norms[i]) for i in range(wr.shape[0]))


def _eig_check(o, ref, p):
    w, v = cpu(o[0]).to(torch.complex128), cpu(o[1]).to(torch.complex128)
    a = ref["A"].to(torch.complex128)
    av = a @ v - v * w.unsqueeze(-2)
    num = av.reshape(*av.shape[:-2], -1).norm(dim=-1).reshape(-1)
    den = (a.reshape(*a.shape[:-2], -1).norm(dim=-1) * v.reshape(*v.shape[:-2], -1).norm(dim=-1)).reshape(-1)
    return worst((num / den).max(), _eigvals_match(w, a))


OPS["eig"] = (build_general_square, lambda a, p: torch.linalg.eig(a["A"]), _eig_check)
OPS["eigvals"] = (
    build_general_square,
    lambda a, p: torch.linalg.eigvals(a["A"]),
    lambda o, ref, p: _eigvals_match(cpu(o), ref["A"].to(torch.complex128)),
)


# SVD family -------------------------------------------------------------------------------
def _svd_check(o, ref, p):
    u, s, vh = (cpu(t) for t in o)
    a = ref["A"]
    u, vh = u.to(a.dtype), vh.to(a.dtype)
    sr = torch.linalg.svdvals(a)
    rec = (u * s.to(a.dtype).unsqueeze(-2)) @ vh
    return worst(rel(rec, a), rel(s.to(sr.dtype), sr, item_dims=1), orth(u), orth(vh.mH))


OPS["svd"] = (build_general, lambda a, p: torch.linalg.svd(a["A"], full_matrices=False), _svd_check)
OPS["svdvals"] = (
    build_general,
    lambda a, p: torch.linalg.svdvals(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.svdvals(ref["A"]), item_dims=1),
)
OPS["pinv"] = (
    build_general,
    lambda a, p: torch.linalg.pinv(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.pinv(ref["A"])),
)


def _rank_build(inp, p):
    m, n = _mn(p)
    a_low, a_ref = inp.cast(inp.low_rank(_b(p), m, n, p["r"]))
    return {"A": a_low}, {"A": a_ref}


OPS["matrix_rank"] = (
    _rank_build,
    lambda a, p: torch.linalg.matrix_rank(a["A"]),
    lambda o, ref, p: float((cpu(o) - p["r"]).abs().max()),
)


# least squares, triangular ----------------------------------------------------------------
def _lstsq_build(inp, p):
    m, n = _mn(p)
    a_low, a_ref = inp.cast(inp.general(_b(p), m, n))
    b_low, b_ref = inp.cast(inp.randn(*_b(p), m, p.get("k", 1)))
    return {"A": a_low, "B": b_low}, {"A": a_ref, "B": b_ref}


OPS["lstsq"] = (
    _lstsq_build,
    lambda a, p: torch.linalg.lstsq(a["A"], a["B"]).solution,
    lambda o, ref, p: rel(o, torch.linalg.lstsq(ref["A"], ref["B"], driver="gelsd").solution),
)


def _tri_build(inp, p):
    b, n, k = _b(p), p["n"], p.get("k", 1)
    upper, left = bool(p.get("upper", True)), bool(p.get("left", True))
    t_low, t_ref = inp.cast(inp.triangular(b, n, upper))
    rhs = inp.randn(*b, n, k) if left else inp.randn(*b, k, n)
    b_low, b_ref = inp.cast(rhs)
    return {"A": t_low, "B": b_low}, {"A": t_ref, "B": b_ref}


def _tri(a, p):
    return torch.linalg.solve_triangular(a["A"], a["B"], upper=bool(p.get("upper", True)), left=bool(p.get("left", True)))


OPS["solve_triangular"] = (_tri_build, _tri, lambda o, ref, p: rel(o, _tri(ref, p)))


# LDL --------------------------------------------------------------------------------------
def _ldl_build(hermitian):
    def build(inp, p):
        b, n, k = _b(p), p["n"], p.get("k", 2)
        a_low, a_ref = inp.cast(inp.ldl_input(b, n, hermitian))
        b_low, b_ref = inp.cast(inp.randn(*b, n, k))
        return {"A": a_low, "B": b_low}, {"A": a_ref, "B": b_ref}
    return build


def _ldl_check(hermitian):
    def check(o, ref, p):
        # Through a solve with the CPU's LAPACK-convention ldl_solve (MAGMA's hetrf output is known
        # to pass a solve check), and, when no pivot interchanged rows (the inputs are built for
        # that), by reconstruction L·D·Lᴴ (Lᵀ for symmetric). Either one shows correct factors.
        a = ref["A"]
        ld, piv = cpu(o[0]).to(a.dtype), cpu(o[1])
        try:
            x = torch.linalg.ldl_solve(ld, piv, ref["B"], hermitian=hermitian)
            by_solve = rel(x, torch.linalg.solve(a, ref["B"]))
        except Exception:  # noqa: BLE001 - the reconstruction may still judge it
            by_solve = math.inf
        n = a.shape[-1]
        if not bool((piv.to(torch.int64) == torch.arange(1, n + 1)).all()):
            return by_solve
        lower = torch.tril(ld, -1) + torch.eye(n, dtype=a.dtype)
        dmat = torch.diag_embed(torch.diagonal(ld, dim1=-2, dim2=-1))
        rec = lower @ dmat @ (lower.mH if hermitian else lower.mT)
        finite = [v for v in (by_solve, rel(rec, a)) if math.isfinite(v)]
        return min(finite) if finite else by_solve
    return check


OPS["ldl_factor"] = (
    _ldl_build(False),
    lambda a, p: torch.linalg.ldl_factor(a["A"], hermitian=False),
    _ldl_check(False),
)
OPS["ldl_factor_hermitian"] = (
    _ldl_build(True),
    lambda a, p: torch.linalg.ldl_factor(a["A"], hermitian=True),
    _ldl_check(True),
)


def _ldl_solve_build(inp, p):
    b, n, k = _b(p), p["n"], p.get("k", 2)
    ld_m, piv = torch.linalg.ldl_factor(inp.symmetric_indefinite(b, n), hermitian=False)
    ld_low, ld_ref = inp.cast(ld_m)
    b_low, b_ref = inp.cast(inp.randn(*b, n, k))
    return {"LD": ld_low, "piv": piv, "B": b_low}, {"LD": ld_ref, "piv": piv, "B": b_ref}


OPS["ldl_solve"] = (
    _ldl_solve_build,
    lambda a, p: torch.linalg.ldl_solve(a["LD"], a["piv"], a["B"], hermitian=False),
    lambda o, ref, p: rel(o, torch.linalg.ldl_solve(ref["LD"], ref["piv"], ref["B"], hermitian=False)),
)


# control: no linalg library involved --------------------------------------------------------
def _exp_build(inp, p):
    n = p["n"]
    a_low, a_ref = inp.cast(inp.randn(*_b(p), n, n) / math.sqrt(n))
    return {"A": a_low}, {"A": a_ref}


OPS["matrix_exp"] = (
    _exp_build,
    lambda a, p: torch.linalg.matrix_exp(a["A"]),
    lambda o, ref, p: rel(o, torch.linalg.matrix_exp(ref["A"])),
)


def to_device(args):
    return {k: (v.to("cuda") if hasattr(v, "to") else v) for k, v in args.items()}


def outputs_to_cpu(o):
    if isinstance(o, (tuple, list)):
        return tuple(cpu(t) for t in o)
    return cpu(o)


# ----------------------------------------------------------------------------- bench inputs
# Built directly on the GPU (no reference needed; sizes up to 8192² would be slow on the CPU).

def bench_args(op_name, p, dtype):
    dev = "cuda"
    b, n, k = _b(p), p["n"], p.get("k", 1)
    g = torch.Generator(device=dev).manual_seed(int(p.get("seed", 0)) & 0x7FFF_FFFF)

    def rn(*shape):
        return torch.randn(*shape, dtype=dtype, device=dev, generator=g)

    eye = torch.eye(n, dtype=dtype, device=dev)

    def spd():
        a = rn(*b, n, n)
        return a @ a.mH / n + eye

    if op_name in ("cholesky", "eigh", "eigvalsh"):
        return {"A": spd() if op_name == "cholesky" else (lambda a: a + a.mH)(rn(*b, n, n))}
    if op_name in ("cholesky_solve", "cholesky_inverse"):
        return {"L": torch.linalg.cholesky(spd()), "B": rn(*b, n, k)}
    if op_name == "lu_factor_nopiv":
        return {"A": rn(*b, n, n) / n + eye}
    if op_name == "lu_solve":
        lu, piv = torch.linalg.lu_factor(rn(*b, n, n) + math.sqrt(n) * eye)
        return {"LU": lu, "piv": piv, "B": rn(*b, n, k)}
    m = p.get("m", n)
    a = rn(*b, m, n)
    if m == n:
        a = a + math.sqrt(n) * eye
    return {"A": a, "B": rn(*b, m, k)}


# ----------------------------------------------------------------------------- worker

class CaptureFds:
    """Send fd 1 and fd 2 (C-level prints included) to a file for the duration of a case."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.f = open(self.path, "wb")
        self.saved = (os.dup(1), os.dup(2))
        os.dup2(self.f.fileno(), 1)
        os.dup2(self.f.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])
        self.f.close()
        return False


def read_tail(path, limit=2000):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else "…" + text[-limit:]


def error_fields(e, phase):
    return {
        "outcome": "error",
        "phase": phase,
        "error_type": type(e).__name__,
        "runtime_error": isinstance(e, RuntimeError),
        "error": str(e)[:4000],
        "error_line": first_line(e),
    }


def set_pref(name):
    torch.backends.cuda.preferred_linalg_library(name)


def pref_name(value):
    """`torch._C._LinalgBackend.Cusolver` (or any spelling of it) -> `cusolver`."""
    text = str(value).lower()
    for name in ("cusolver", "magma", "default"):
        if name in text:
            return name
    return text


def current_pref():
    try:
        return pref_name(torch.backends.cuda.preferred_linalg_library())
    except Exception as e:  # noqa: BLE001
        return "unknown: " + first_line(e)


def run_case(case, base_pref, proto):
    import warnings

    out = {"id": case["id"]}
    p = dict(case.get("params", {}))
    dtype = DTYPES[case["dtype"]]()
    pref = case["preference"]
    applied = case.get("applied_preference", pref)
    out["applied_preference"] = applied
    stderr_path = case["stderr_path"]
    with warnings.catch_warnings(record=True) as caught, CaptureFds(stderr_path):
        warnings.simplefilter("always")
        try:
            if case.get("kind") == "bench":
                out.update(run_bench(case, p, dtype, applied))
            else:
                out.update(run_check(case, p, dtype, applied))
        except Exception as e:  # noqa: BLE001 - reported, judged by splitpkg
            out.update(error_fields(e, "harness"))
            out["traceback"] = traceback.format_exc()[-2000:]
        finally:
            try:
                set_pref(base_pref)
            except Exception as e:  # noqa: BLE001
                out["reset_error"] = first_line(e)
            out["preference_after"] = current_pref()
    out["warnings"] = sorted({first_line(w.message) for w in caught})[:5]
    out["stderr"] = read_tail(stderr_path)
    # A CUDA error is sticky: if the context is broken the worker must not judge later cases.
    try:
        torch.cuda.synchronize()
        out["context_ok"] = True
    except Exception as e:  # noqa: BLE001
        out["context_ok"] = False
        out["context_error"] = first_line(e)
    proto.write(encode(out) + "\n")
    proto.flush()
    return out["context_ok"] and "reset_error" not in out


def run_check(case, p, dtype, applied):
    out = {}
    try:
        set_pref(applied)
    except Exception as e:  # noqa: BLE001
        return error_fields(e, "set_preference")
    build, run, check = OPS[case["op"]]
    try:
        inp = Inputs(case["seed"], dtype)
        args_cpu, ref = build(inp, p)
        args = to_device(args_cpu)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return error_fields(e, "inputs")
    t0 = time.perf_counter()
    try:
        o = run(args, p)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        out.update(error_fields(e, "op"))
        out["time_ms"] = (time.perf_counter() - t0) * 1e3
        return out
    out["time_ms"] = (time.perf_counter() - t0) * 1e3
    try:
        residual = check(outputs_to_cpu(o), ref, p)
    except Exception as e:  # noqa: BLE001
        out.update(error_fields(e, "check"))
        return out
    out["outcome"] = "ok"
    out["residual"] = float(residual)
    return out


def run_bench(case, p, dtype, applied):
    reps = int(case.get("reps", 5))
    # Calls past the third stop once the timed calls add up to the budget, at an odd count: a
    # 1.6 s MAGMA eigh is timed 3 times, not 5 (7 s of the smoke's minute); quick ops still 5.
    budget_ms = float(case.get("budget_ms", 0))
    name = case["op"]
    # Inputs first, under the base preference; then the preference being timed.
    args = bench_args(name, dict(p, seed=case.get("seed", 0)), dtype)
    torch.cuda.synchronize()
    set_pref(applied)
    fns = {
        "lu_factor": lambda: torch.linalg.lu_factor(args["A"]),
        "lu_factor_nopiv": lambda: torch.linalg.lu_factor(args["A"], pivot=False),
        "lu_solve": lambda: torch.linalg.lu_solve(args["LU"], args["piv"], args["B"]),
        "solve": lambda: torch.linalg.solve(args["A"], args["B"]),
        "inv": lambda: torch.linalg.inv(args["A"]),
        "det": lambda: torch.linalg.det(args["A"]),
        "cholesky": lambda: torch.linalg.cholesky(args["A"]),
        "cholesky_solve": lambda: torch.cholesky_solve(args["B"], args["L"]),
        "cholesky_inverse": lambda: torch.cholesky_inverse(args["L"]),
        "eigh": lambda: torch.linalg.eigh(args["A"]),
        "eig": lambda: torch.linalg.eig(args["A"]),
        "svd": lambda: torch.linalg.svd(args["A"], full_matrices=False),
        "qr": lambda: torch.linalg.qr(args["A"]),
    }
    fn = fns[name]
    torch.cuda.synchronize()
    times = []
    try:
        fn()  # warm-up
        torch.cuda.synchronize()
        for _ in range(reps):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
            if budget_ms and len(times) >= 3 and len(times) % 2 and sum(times) >= budget_ms:
                break
    except Exception as e:  # noqa: BLE001
        return error_fields(e, "op")
    ordered = sorted(times)
    return {"outcome": "ok", "times_ms": times, "median_ms": ordered[len(ordered) // 2]}


def worker(base_pref):
    # The protocol goes to a private copy of stdout; fd 1 itself is redirected per case.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    try:
        import_torch()
        torch.zeros(1, device="cuda")
        x = torch.randn(8, 8, device="cuda")
        (x @ x).sum().item()
        set_pref(base_pref)
    except Exception as e:  # noqa: BLE001
        proto.write(encode({"ready": False, "error": str(e)[:2000], "error_line": first_line(e)}) + "\n")
        proto.flush()
        return 3
    proto.write(encode({"ready": True, "pid": os.getpid(), "preference": current_pref()}) + "\n")
    proto.flush()
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        if line == "quit":
            break
        if not run_case(json.loads(line), base_pref, proto):
            return 4
    return 0


# ----------------------------------------------------------------------------- probe

def probe(lazy):
    out = {"python": sys.version.split()[0], "lazy_name": lazy}
    try:
        import_torch()
    except Exception as e:  # noqa: BLE001
        out.update({"import_ok": False, "import_error": str(e)[:2000]})
        print(encode(out))
        return 3
    out["import_ok"] = True
    out["torch_version"] = torch.__version__
    out["torch_file"] = torch.__file__
    out["cuda_version"] = torch.version.cuda
    out["has_magma"] = bool(torch.cuda.has_magma)
    out["preference_at_start"] = current_pref()
    out["prefer_cusolver_env"] = os.environ.get("TORCH_LINALG_PREFER_CUSOLVER")
    try:
        cfg = torch.__config__.show()
        out["config_magma"] = [l.strip() for l in cfg.splitlines() if "magma" in l.lower()][:3]
    except Exception as e:  # noqa: BLE001
        out["config_magma"] = ["error: " + first_line(e)]
    out["mapped_after_import"] = maps_path(lazy)
    try:
        out["cuda_available"] = torch.cuda.is_available()
        out["device_name"] = torch.cuda.get_device_name(0)
        out["capability"] = list(torch.cuda.get_device_capability(0))
        torch.cuda.init()
        out["mapped_after_cuda_init"] = maps_path(lazy)
        x = torch.randn(8, 8, device="cuda")
        (x @ x).sum().item()
        torch.cuda.synchronize()
        out["mapped_after_matmul"] = maps_path(lazy)
    except Exception as e:  # noqa: BLE001
        out["cuda_error"] = str(e)[:2000]
        print(encode(out))
        return 0
    free0, total = torch.cuda.mem_get_info()
    try:
        a = torch.randn(8, 8, device="cuda", dtype=torch.float64)
        torch.linalg.cholesky(a @ a.mT + 8 * torch.eye(8, device="cuda", dtype=torch.float64))
        torch.cuda.synchronize()
        out["first_linalg_ok"] = True
    except Exception as e:  # noqa: BLE001
        out["first_linalg_ok"] = False
        out["first_linalg_error"] = str(e)[:2000]
    out["mapped_after_linalg"] = maps_path(lazy)
    # The runtime test for MAGMA that does not trust has_magma (compiled into libtorch_cuda.so):
    # look magma_init up in the lazy library this process actually loaded. RTLD_NOLOAD never loads
    # anything new, so the answer is about this process.
    if out["mapped_after_linalg"]:
        try:
            import ctypes

            lib = ctypes.CDLL(out["mapped_after_linalg"], mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            out["loaded_library_exports_magma_init"] = hasattr(lib, "magma_init")
        except OSError as e:
            out["loaded_library_probe_error"] = first_line(e)
    try:
        free1, _ = torch.cuda.mem_get_info()
        out["device_memory_growth_mib"] = round((free0 - free1) / 2**20, 1)
    except Exception:  # noqa: BLE001
        pass
    print(encode(out))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "selftest":
        selftest()
        return 0
    if len(argv) >= 4 and argv[1] == "probe" and argv[2] == "--lazy":
        return probe(argv[3])
    if len(argv) >= 4 and argv[1] == "worker" and argv[2] == "--base-pref":
        return worker(argv[3])
    sys.stderr.write("usage: battery.py selftest | probe --lazy NAME | worker --base-pref PREF\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
