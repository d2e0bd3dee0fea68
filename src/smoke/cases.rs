//! The battery plan: which cases exist, per op, shape, dtype and backend preference.
//!
//! The catalog is data: every CUDA linalg op that PyTorch routes through the lazy library, with
//! the shapes that matter for 2.11's MAGMA-vs-cuSOLVER heuristics (batched, non-square, the
//! `n ≤ 8, 256 ≤ k ≤ 1024` lu_solve window), plus one control op that never touches the library.
//! Tags name the routing facts the expectation tables match on (`magma-by-default`: PyTorch 2.11
//! sends this shape to MAGMA under the default preference when the library has MAGMA).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Every dtype a case may run in.
pub const DTYPES: [&str; 4] = ["float32", "float64", "complex64", "complex128"];
/// The real dtypes.
pub const REAL: &[&str] = &["float32", "float64"];
/// The complex dtypes.
pub const COMPLEX: &[&str] = &["complex64", "complex128"];

/// A linalg backend preference (`torch.backends.cuda.preferred_linalg_library`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Preference {
    /// Whatever torch picks by default (`default`).
    Default,
    /// cuSOLVER/cuBLAS forced (`cusolver`).
    Cusolver,
    /// MAGMA forced (`magma`).
    Magma,
}

impl std::fmt::Display for Preference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Preference {
    /// Every preference, in the order cases and bench items run.
    pub const ALL: [Preference; 3] = [Preference::Default, Preference::Cusolver, Preference::Magma];

    /// The name PyTorch and the battery use.
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Default => "default",
            Preference::Cusolver => "cusolver",
            Preference::Magma => "magma",
        }
    }
}

/// A preference name that is none of [`Preference::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown linalg preference {0:?}")]
pub struct UnknownPreference(String);

impl std::str::FromStr for Preference {
    type Err = UnknownPreference;

    fn from_str(s: &str) -> Result<Preference, UnknownPreference> {
        Preference::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPreference(s.to_string()))
    }
}

/// One entry of the catalog: an op on one shape, for the listed dtypes.
pub struct CatalogEntry {
    /// The op (`linalg.cholesky`), as the battery knows it.
    pub op: &'static str,
    /// Short shape label, e.g. `16x64x64` (batch first) or `300x200`.
    pub shape: &'static str,
    /// Parameters the battery's op reads: `b` (batch dims), `n`, `m`, `k`, `r`, options.
    pub params: fn() -> Value,
    /// The dtypes the entry runs in.
    pub dtypes: &'static [&'static str],
    /// The routing facts table rules match on (`batched`, `magma-only`, …).
    pub tags: &'static [&'static str],
}

macro_rules! entry {
    ($op:literal, $shape:literal, $params:tt, $dtypes:expr, [$($tag:literal),*]) => {
        CatalogEntry { op: $op, shape: $shape, params: || json!($params), dtypes: $dtypes, tags: &[$($tag),*] }
    };
}

const ALL: &[&str] = &DTYPES;

/// The catalog. Sizes are small on purpose: the whole battery, three preferences, runs in a few
/// minutes on one GPU; the heuristics switch on batch size and shape, not on bulk.
pub fn catalog() -> Vec<CatalogEntry> {
    vec![
        entry!("cholesky", "64x64", {"n": 64}, ALL, []),
        entry!("cholesky", "16x32x32", {"b": [16], "n": 32}, ALL, ["batched"]),
        entry!("cholesky_solve", "32x32,k=2", {"n": 32, "k": 2}, ALL, []),
        entry!("cholesky_solve", "16x64x64,k=2", {"b": [16], "n": 64, "k": 2}, ALL, ["batched", "magma-by-default"]),
        entry!("cholesky_inverse", "32x32", {"n": 32}, ALL, []),
        entry!("cholesky_inverse", "16x64x64", {"b": [16], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("lu_factor", "64x64", {"n": 64}, ALL, []),
        entry!("lu_factor", "32x64x64", {"b": [32], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("lu_factor", "4x256x256", {"b": [4], "n": 256}, ALL, ["batched", "magma-by-default"]),
        entry!("lu_factor", "300x200", {"m": 300, "n": 200}, ALL, ["non-square", "magma-by-default"]),
        entry!("lu_factor", "64x96", {"m": 64, "n": 96}, ALL, ["non-square", "magma-by-default"]),
        entry!("lu_factor_nopiv", "32x64x64", {"b": [32], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("lu", "4x256x256", {"b": [4], "n": 256}, ALL, ["batched", "magma-by-default"]),
        entry!("lu", "96x64", {"m": 96, "n": 64}, ALL, ["non-square", "magma-by-default"]),
        entry!("lu_solve", "64x64,k=2", {"n": 64, "k": 2}, ALL, []),
        entry!("lu_solve", "4x4,k=512", {"n": 4, "k": 512}, ALL, ["small-n-wide-rhs", "magma-by-default"]),
        entry!("lu_solve", "4x8x8,k=300", {"b": [4], "n": 8, "k": 300}, ALL, ["batched", "small-n-wide-rhs", "magma-by-default"]),
        entry!("lu_solve", "8x32x32,k=4", {"b": [8], "n": 32, "k": 4}, ALL, ["batched"]),
        entry!("solve", "64x64,k=3", {"n": 64, "k": 3}, ALL, []),
        entry!("solve", "32x64x64,k=3", {"b": [32], "n": 64, "k": 3}, ALL, ["batched", "magma-by-default"]),
        entry!("inv", "128x128", {"n": 128}, ALL, []),
        entry!("inv", "32x64x64", {"b": [32], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("det", "32x64x64", {"b": [32], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("slogdet", "32x64x64", {"b": [32], "n": 64}, ALL, ["batched", "magma-by-default"]),
        entry!("slogdet", "256x256", {"n": 256}, ALL, []),
        entry!("qr", "64x32", {"m": 64, "n": 32}, ALL, ["non-square"]),
        entry!("qr", "8x32x16", {"b": [8], "m": 32, "n": 16}, ALL, ["batched", "non-square"]),
        entry!("qr", "16x48", {"m": 16, "n": 48}, ALL, ["non-square"]),
        entry!("geqrf", "32x16", {"m": 32, "n": 16}, ALL, ["non-square"]),
        entry!("householder_product", "32x16", {"m": 32, "n": 16}, ALL, ["non-square"]),
        entry!("ormqr", "32x32,k=4", {"n": 32, "k": 4}, ALL, []),
        entry!("ormqr", "32x32,k=4,transpose", {"n": 32, "k": 4, "transpose": true}, ALL, []),
        entry!("eigh", "64x64", {"n": 64}, ALL, []),
        entry!("eigh", "8x32x32", {"b": [8], "n": 32}, ALL, ["batched"]),
        entry!("eigh", "256x256", {"n": 256}, ALL, []),
        entry!("eigvalsh", "4x128x128", {"b": [4], "n": 128}, ALL, ["batched"]),
        entry!("eig", "32x32", {"n": 32}, ALL, []),
        entry!("eig", "4x64x64", {"b": [4], "n": 64}, ALL, ["batched"]),
        entry!("eigvals", "128x128", {"n": 128}, ALL, []),
        entry!("svd", "64x32", {"m": 64, "n": 32}, ALL, ["non-square"]),
        entry!("svd", "8x32x16", {"b": [8], "m": 32, "n": 16}, ALL, ["batched", "non-square"]),
        entry!("svd", "256x128", {"m": 256, "n": 128}, ALL, ["non-square"]),
        entry!("svd", "16x48", {"m": 16, "n": 48}, ALL, ["non-square"]),
        entry!("svdvals", "64x32", {"m": 64, "n": 32}, ALL, ["non-square"]),
        entry!("pinv", "32x16", {"m": 32, "n": 16}, ALL, ["non-square"]),
        entry!("pinv", "256x128", {"m": 256, "n": 128}, ALL, ["non-square"]),
        entry!("matrix_rank", "64x48,rank=20", {"m": 64, "n": 48, "r": 20}, ALL, ["non-square"]),
        entry!("lstsq", "64x32,k=2", {"m": 64, "n": 32, "k": 2}, ALL, ["non-square"]),
        entry!("lstsq", "8x32x16,k=2", {"b": [8], "m": 32, "n": 16, "k": 2}, ALL, ["batched", "non-square"]),
        entry!("solve_triangular", "32x32,k=2,upper", {"n": 32, "k": 2, "upper": true, "left": true}, ALL, []),
        entry!("solve_triangular", "8x32x32,k=4,lower", {"b": [8], "n": 32, "k": 4, "upper": false, "left": true}, ALL, ["batched"]),
        entry!("solve_triangular", "32x32,k=4,right", {"n": 32, "k": 4, "upper": true, "left": false}, ALL, []),
        entry!("ldl_factor", "32x32", {"n": 32}, ALL, []),
        entry!("ldl_factor", "4x32x32", {"b": [4], "n": 32}, ALL, ["batched"]),
        entry!("ldl_factor_hermitian", "32x32", {"n": 32}, COMPLEX, ["complex-hermitian", "magma-only"]),
        entry!("ldl_factor_hermitian", "4x32x32", {"b": [4], "n": 32}, COMPLEX, ["batched", "complex-hermitian", "magma-only"]),
        entry!("ldl_solve", "32x32,k=2", {"n": 32, "k": 2}, ALL, []),
        entry!("matrix_exp", "16x16", {"n": 16}, ALL, ["control"]),
    ]
}

/// Every op name in the catalog, in catalog order.
pub fn ops() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for e in catalog() {
        if !out.contains(&e.op) {
            out.push(e.op);
        }
    }
    out
}

/// One planned case: an entry, one dtype, one preference.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Case {
    /// `op/shape/dtype/preference`, unique within a variant.
    pub id: String,
    /// The op as the battery names it: the `torch.linalg` (or `torch`) function, `lu_factor_nopiv`
    /// for `pivot=False`, `ldl_factor_hermitian` for `hermitian=True`; `matrix_exp` is the control.
    pub op: String,
    /// The shape label, batch first, then options: `16x64x64,k=2` is 16 matrices of 64×64 with 2
    /// right-hand-side columns.
    pub shape: String,
    /// The parameters the battery's op reads: `b` (batch dims), `n`, `m`, `k` (right-hand-side
    /// columns), `r` (rank), and options (`upper`, `left`, `transpose`).
    pub params: Value,
    /// The dtype the op runs in: `float32`, `float64`, `complex64` or `complex128`.
    pub dtype: String,
    /// The preference the case stands for (what a user would set).
    pub preference: Preference,
    /// The preference actually set in the process: differs from `preference` only when emulating
    /// (the emulated nomagma forces `cusolver`).
    pub applied_preference: Preference,
    /// The routing facts table rules match on: `batched`, `non-square`, `magma-by-default`,
    /// `small-n-wide-rhs`, `complex-hermitian`, `magma-only`, `control`. Empty for none.
    pub tags: Vec<String>,
}

/// How a variant is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The variant's own installation, every preference.
    Real,
    /// A MAGMA installation standing in for nomagma: the cuSOLVER preference forced for every case,
    /// the `magma` preference not run (it cannot be emulated).
    EmulatedNomagma,
}

impl Mode {
    /// A real variant, or an emulated one (`--emulate`).
    pub fn of(emulated: bool) -> Mode {
        if emulated {
            Mode::EmulatedNomagma
        } else {
            Mode::Real
        }
    }

    /// The preferences a variant of this mode is run under: all three for a real variant; `default`
    /// and `cusolver` for the emulated nomagma, which has no MAGMA to force.
    pub fn preferences(self) -> &'static [Preference] {
        match self {
            Mode::Real => &Preference::ALL,
            Mode::EmulatedNomagma => &Preference::ALL[..2],
        }
    }

    /// The preference the worker resets to after every case.
    pub fn base_preference(self) -> Preference {
        match self {
            Mode::Real => Preference::Default,
            Mode::EmulatedNomagma => Preference::Cusolver,
        }
    }

    /// The preference set in the process for a case that stands for `preference`.
    pub fn applied(self, preference: Preference) -> Preference {
        match self {
            Mode::Real => preference,
            Mode::EmulatedNomagma => Preference::Cusolver,
        }
    }
}

/// Case filter: `--only` substrings (any must match the id) and `--skip` substrings (none may).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// `--only` substrings: a case runs when its id contains any of them (all run when empty).
    pub only: Vec<String>,
    /// `--skip` substrings: a case whose id contains any of them does not run.
    pub skip: Vec<String>,
}

impl Filter {
    /// Whether the case with this id passes the filter.
    pub fn keeps(&self, id: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|s| id.contains(s.as_str())))
            && !self.skip.iter().any(|s| id.contains(s.as_str()))
    }
}

/// The planned cases for one variant: catalog × dtypes × the mode's preferences, op-major so a
/// hang in one op is found early and the other ops still run.
pub fn plan(mode: Mode, filter: &Filter) -> Vec<Case> {
    let mut out = Vec::new();
    for e in catalog() {
        for dtype in e.dtypes {
            for pref in mode.preferences() {
                let id = format!("{}/{}/{}/{}", e.op, e.shape, dtype, pref.as_str());
                if !filter.keeps(&id) {
                    continue;
                }
                out.push(Case {
                    id,
                    op: e.op.to_string(),
                    shape: e.shape.to_string(),
                    params: (e.params)(),
                    dtype: dtype.to_string(),
                    preference: *pref,
                    applied_preference: mode.applied(*pref),
                    tags: e.tags.iter().map(|t| t.to_string()).collect(),
                });
            }
        }
    }
    out
}

/// Per-case seed from the run seed: SplitMix64 of the seed mixed with an FNV-1a hash of the id,
/// cut to 53 bits so it survives any JSON reader.
pub fn case_seed(run_seed: u64, id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = run_seed ^ h;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & ((1u64 << 53) - 1)
}

/// One item of `--bench`: op, size and dtype, timed under each preference.
pub struct BenchItem {
    /// The op (`linalg.solve`), as the battery knows it.
    pub op: &'static str,
    /// Size label (`4096x4096`).
    pub size: &'static str,
    /// Parameters the battery's op reads.
    pub params: fn() -> Value,
    /// The dtype it is timed in.
    pub dtype: &'static str,
    /// Why this row is in the table (which path the default takes in 2.11).
    pub why: &'static str,
}

macro_rules! bench {
    ($op:literal, $size:literal, $params:tt, $dtype:literal, $why:literal) => {
        BenchItem {
            op: $op,
            size: $size,
            params: || json!($params),
            dtype: $dtype,
            why: $why,
        }
    };
}

/// The timing rows: large single matrices where the default is already cuSOLVER, and batched or
/// small-n shapes where 2.11's default picks MAGMA (the data a user needs before dropping MAGMA).
pub fn bench_items() -> Vec<BenchItem> {
    vec![
        bench!("lu_factor", "8192x8192", {"n": 8192}, "float64", "default: cuSOLVER (batch 1)"),
        bench!("lu_factor", "4096x4096", {"n": 4096}, "float32", "default: cuSOLVER (batch 1)"),
        bench!("lu_factor", "64x256x256", {"b": [64], "n": 256}, "float64", "default: MAGMA batched LU"),
        bench!("lu_factor_nopiv", "32x512x512", {"b": [32], "n": 512}, "float64", "default: MAGMA batched no-pivot LU"),
        bench!("solve", "20000x32x32,k=1", {"b": [20000], "n": 32, "k": 1}, "float64", "default: MAGMA batched LU"),
        bench!("inv", "1024x64x64", {"b": [1024], "n": 64}, "float64", "default: MAGMA batched LU"),
        bench!("lu_solve", "1024x8x8,k=512", {"b": [1024], "n": 8, "k": 512}, "float64", "default: MAGMA batched getrs"),
        bench!("cholesky_solve", "1024x64x64,k=1", {"b": [1024], "n": 64, "k": 1}, "float64", "default: MAGMA batched potrs"),
        bench!("cholesky_inverse", "1024x64x64", {"b": [1024], "n": 64}, "float64", "default: MAGMA batched potrs"),
        bench!("cholesky", "4096x4096", {"n": 4096}, "float64", "cuSOLVER under every preference (noise check)"),
        bench!("cholesky", "20000x32x32", {"b": [20000], "n": 32}, "float64", "cuSOLVER under every preference (noise check)"),
        bench!("eigh", "4096x4096", {"n": 4096}, "float64", "default: cuSOLVER"),
        bench!("eig", "1024x1024", {"n": 1024}, "float64", "default: cuSOLVER Xgeev"),
        bench!("svd", "2048x2048", {"n": 2048}, "float64", "default: cuSOLVER (magma preference hits the stock gesvdj bug)"),
    ]
}
