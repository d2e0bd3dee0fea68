//! The directories glibc's ld.so adds around a search path, per machine: the hardware-capability
//! subdirectories it tries inside every search-path directory before the directory itself, and the
//! system's default (multiarch) directories.
//!
//! Read from ld.so's own account (`LD_DEBUG=libs`, "search path=…", and `ld.so --help`) of two
//! glibc 2.36 loaders: Debian 12's on x86-64 (a CPU with AVX-512, so every level is supported) and
//! Debian's `libc6-arm64-cross` under `qemu-aarch64 -L /usr/aarch64-linux-gnu` (qemu's `max` CPU,
//! which has LSE atomics). `tests/it/loader_aarch64.rs` and `tests/it/loader.rs` run the `hwcaps`
//! scenario under both.
//!
//! - `glibc-hwcaps/<level>` (glibc 2.33 and later): x86-64 levels v4, v3, v2 in that order; the
//!   aarch64 loader searches none.
//! - The legacy subdirectories (glibc up to 2.36; 2.37 removed them): every combination of `tls`,
//!   the platform (AT_PLATFORM: `haswell` on x86-64 CPUs with AVX2, `aarch64` on every AArch64)
//!   and the "important" hwcap bits (`avx512_1`, `x86_64`; `atomics`), the longest first.
//!
//! A file in one of these subdirectories is the one ld.so takes wherever it searches that
//! subdirectory: the model takes it, as the reference loaders did. On glibc 2.37 or later (legacy
//! names) or a CPU without the capability, ld.so takes the directory's own file instead; the edge's
//! `dir` names the subdirectory, so the choice is visible.

/// The subdirectories ld.so tries in each search-path directory, in its order, for a process of
/// ELF machine `machine` (goblin's name, as `ElfFacts::machine` holds it).
pub fn subdirs(machine: &str) -> &'static [&'static str] {
    match machine {
        "X86_64" => X86_64,
        "AARCH64" => AARCH64,
        _ => &[],
    }
}

const X86_64: &[&str] = &[
    "glibc-hwcaps/x86-64-v4",
    "glibc-hwcaps/x86-64-v3",
    "glibc-hwcaps/x86-64-v2",
    "tls/haswell/avx512_1/x86_64",
    "tls/haswell/avx512_1",
    "tls/haswell/x86_64",
    "tls/haswell",
    "tls/avx512_1/x86_64",
    "tls/avx512_1",
    "tls/x86_64",
    "tls",
    "haswell/avx512_1/x86_64",
    "haswell/avx512_1",
    "haswell/x86_64",
    "haswell",
    "avx512_1/x86_64",
    "avx512_1",
    "x86_64",
];

const AARCH64: &[&str] = &[
    "tls/aarch64/atomics",
    "tls/aarch64",
    "tls/atomics",
    "tls",
    "aarch64/atomics",
    "aarch64",
    "atomics",
];

/// Whether a directory named `name` can start one of the subdirectories of any machine: a tree
/// directory holding one is searched through them (every other directory skips the probes).
pub fn starts_subdir(name: &str) -> bool {
    [X86_64, AARCH64]
        .iter()
        .flat_map(|s| s.iter())
        .any(|s| s.split('/').next() == Some(name))
}

/// The system's default directories for a library of ELF machine `machine`: the Debian multiarch
/// pair of that machine (Debian's and Ubuntu's ld.so search these first), the plain ones (RHEL's
/// `/lib64`), then, for a machine other than this one, Debian's cross sysroot (`/usr/<triplet>/lib`,
/// where `libc6-<arch>-cross` puts the libraries `qemu-<arch> -L` loads). A library of another
/// machine found in one is skipped by the caller, as ld.so skips it.
pub fn default_dirs(machine: &str) -> Vec<String> {
    let triplet = match machine {
        "X86_64" => Some("x86_64-linux-gnu"),
        "AARCH64" => Some("aarch64-linux-gnu"),
        "PPC64" => Some("powerpc64le-linux-gnu"),
        _ => None,
    };
    let mut dirs: Vec<String> = Vec::new();
    if let Some(t) = triplet {
        dirs.extend([format!("/lib/{t}"), format!("/usr/lib/{t}")]);
    }
    dirs.extend(["/lib64", "/usr/lib64", "/lib", "/usr/lib"].map(String::from));
    let native = match std::env::consts::ARCH {
        "x86_64" => "X86_64",
        "aarch64" => "AARCH64",
        "powerpc64" => "PPC64",
        other => other,
    };
    if let Some(t) = triplet.filter(|_| machine != native) {
        dirs.push(format!("/usr/{t}/lib"));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The legacy list is every combination of the components, the longest (and the earlier
    /// components') first: what both reference loaders printed.
    #[test]
    fn legacy_subdirectories_are_the_combinations_in_ld_so_order() {
        let combos = |parts: &[&str]| -> Vec<String> {
            let n = parts.len();
            (1..1u32 << n)
                .rev()
                .map(|mask| {
                    let picked: Vec<&str> = (0..n)
                        .filter(|i| mask & (1 << (n - 1 - i)) != 0)
                        .map(|i| parts[i])
                        .collect();
                    picked.join("/")
                })
                .collect()
        };
        assert_eq!(combos(&["tls", "aarch64", "atomics"]), subdirs("AARCH64"));
        assert_eq!(
            combos(&["tls", "haswell", "avx512_1", "x86_64"]),
            subdirs("X86_64")[3..]
        );
        assert!(starts_subdir("glibc-hwcaps") && starts_subdir("atomics"));
        assert!(!starts_subdir("lib") && subdirs("PPC64").is_empty());
    }

    #[test]
    fn default_directories_are_the_machines_multiarch_ones() {
        let a = default_dirs("AARCH64");
        assert_eq!(
            a[..2],
            ["/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]
        );
        assert!(!a.iter().any(|d| d.contains("x86_64")));
        assert!(default_dirs("X86_64").contains(&"/usr/lib/x86_64-linux-gnu".to_string()));
    }
}
