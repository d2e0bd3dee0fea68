//! A PEP 751 lock file (`pylock.toml`, as `uv pip compile --format pylock.toml` and `pip lock`
//! write it), read for one thing: the download size of each locked wheel that a given wheel's
//! platform and Python would install. splitpkg has no HTTPS client (and must not grow one), so
//! the sizes the index states come through the lock a user's own installer wrote.
//!
//! Read through the one opener with a size cap; every name, version and wheel tag that can reach
//! a terminal or a page is checked with the PyPA rules first (docs/security.md), so a hostile lock
//! is refused with one line naming the file.

use crate::error::Context;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::file::{Links, MAX_METADATA_BYTES, read_text};
use crate::sanitize::{check_dist_name, check_version, check_wheel_tag};

/// A wheel larger than this stated size is a lie (PyPI's own limit is far below it).
const MAX_WHEEL_BYTES: u64 = 1 << 40;

#[derive(Debug, Deserialize)]
struct RawLock {
    #[serde(rename = "lock-version")]
    lock_version: String,
    #[serde(default)]
    packages: Vec<RawPackage>,
}

#[derive(Debug, Deserialize)]
struct RawPackage {
    name: String,
    version: Option<String>,
    #[serde(default)]
    wheels: Vec<RawWheel>,
}

#[derive(Debug, Deserialize)]
struct RawWheel {
    name: Option<String>,
    url: Option<String>,
    path: Option<String>,
    size: Option<u64>,
}

/// One locked package: its checked name and version, and its wheels.
#[derive(Debug, Clone)]
pub struct Package {
    /// The distribution's name as the lock writes it (checked to be a valid name).
    pub name: String,
    /// Its locked version, when the lock states one.
    pub version: Option<String>,
    /// Its wheels, as the lock lists them.
    pub wheels: Vec<Wheel>,
}

/// A locked wheel: its tags (from its file name) and the size the lock states, if any.
#[derive(Debug, Clone)]
pub struct Wheel {
    /// The wheel's compatibility tags, from its file name.
    pub tags: Tags,
    /// The size the lock states for it, in bytes; None when it states none.
    pub size: Option<u64>,
}

/// A wheel's compressed tag sets (`cp311`, `cp311`, `manylinux_2_28_x86_64`; `py2.py3` is two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    /// Python tags (`cp311`, `py3`).
    pub python: Vec<String>,
    /// ABI tags (`cp311`, `abi3`, `none`).
    pub abi: Vec<String>,
    /// Platform tags (`manylinux_2_28_x86_64`, `any`).
    pub platform: Vec<String>,
}

impl Tags {
    /// The tags of a wheel file name (`NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl`); `None` for a
    /// name that is not one.
    pub fn of_file_name(file: &str) -> Option<Tags> {
        let stem = file.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        let [py, abi, plat] = match parts.len() {
            5 | 6 => [
                parts[parts.len() - 3],
                parts[parts.len() - 2],
                parts[parts.len() - 1],
            ],
            _ => return None,
        };
        let split = |s: &str| s.split('.').map(str::to_string).collect::<Vec<_>>();
        let tags = Tags {
            python: split(py),
            abi: split(abi),
            platform: split(plat),
        };
        let ok = tags
            .python
            .iter()
            .chain(&tags.abi)
            .chain(&tags.platform)
            .all(|t| check_wheel_tag(t).is_ok());
        ok.then_some(tags)
    }

    /// `cp311-cp311-manylinux_2_28_x86_64`, as in the file name.
    pub fn text(&self) -> String {
        format!(
            "{}-{}-{}",
            self.python.join("."),
            self.abi.join("."),
            self.platform.join(".")
        )
    }

    /// uv's `--python-platform` for the first platform tag (`x86_64-manylinux_2_28`).
    pub fn uv_platform(&self) -> Option<String> {
        self.platform.iter().find_map(|t| match Platform::of(t) {
            Platform::Glibc { glibc, arch } => {
                Some(format!("{arch}-manylinux_{}_{}", glibc.0, glibc.1))
            }
            Platform::Linux { arch } => Some(format!("{arch}-unknown-linux-gnu")),
            _ => None,
        })
    }

    /// uv's `--python-version` for the first `cpXY` tag (`3.11`).
    pub fn python_version(&self) -> Option<String> {
        self.cpython()
            .map(|(major, minor)| format!("{major}.{minor}"))
    }

    /// The CPython version the first `cpXY` tag names: (3, 11).
    fn cpython(&self) -> Option<(u32, u32)> {
        self.python.iter().find_map(|t| cpython(t))
    }

    /// Whether an installer on the platform and Python these tags were built for would take a
    /// wheel with `other`'s tags.
    pub fn installs(&self, other: &Tags) -> bool {
        self.python_takes(other) && self.platform_takes(other)
    }

    fn python_takes(&self, other: &Tags) -> bool {
        let Some((major, minor)) = self.cpython() else {
            // A pure-Python input says nothing of the interpreter: every Python tag counts.
            return true;
        };
        let abi3 = other.abi.iter().any(|a| a == "abi3");
        other.python.iter().any(|t| {
            t == &format!("py{major}")
                || t == &format!("py{major}{minor}")
                || self.python.contains(t)
                || cpython(t)
                    .is_some_and(|(ma, mi)| ma == major && (mi == minor || (abi3 && mi <= minor)))
        })
    }

    fn platform_takes(&self, other: &Tags) -> bool {
        let ours: Vec<Platform> = self.platform.iter().map(|p| Platform::of(p)).collect();
        if ours.iter().all(|p| *p == Platform::Any) {
            // A pure input wheel: nothing to choose by, every locked wheel counts.
            return true;
        }
        other.platform.iter().any(|t| {
            let theirs = Platform::of(t);
            theirs == Platform::Any || ours.iter().any(|p| p.takes(&theirs))
        })
    }
}

fn cpython(tag: &str) -> Option<(u32, u32)> {
    let digits = tag.strip_prefix("cp")?;
    let (major, minor) = digits.split_at_checked(1)?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A platform tag as far as choosing a Linux wheel needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Platform {
    Any,
    /// `manylinux_2_28_x86_64`, `manylinux2014_x86_64` (2.17), `manylinux1_x86_64` (2.5).
    Glibc {
        glibc: (u32, u32),
        arch: String,
    },
    /// `musllinux_1_2_x86_64`.
    Musl {
        musl: (u32, u32),
        arch: String,
    },
    /// `linux_x86_64`: built here, no libc bound.
    Linux {
        arch: String,
    },
    /// Anything else (macOS, Windows): taken only by the same tag.
    Other(String),
}

impl Platform {
    fn of(tag: &str) -> Platform {
        let legacy = [
            ("manylinux2014_", (2, 17)),
            ("manylinux2010_", (2, 12)),
            ("manylinux1_", (2, 5)),
        ];
        if tag == "any" {
            return Platform::Any;
        }
        for (prefix, glibc) in legacy {
            if let Some(arch) = tag.strip_prefix(prefix) {
                let arch = arch.to_string();
                return Platform::Glibc { glibc, arch };
            }
        }
        let versioned = |rest: &str| -> Option<((u32, u32), String)> {
            let mut it = rest.splitn(3, '_');
            let major = it.next()?.parse().ok()?;
            let minor = it.next()?.parse().ok()?;
            Some(((major, minor), it.next()?.to_string()))
        };
        if let Some((glibc, arch)) = tag.strip_prefix("manylinux_").and_then(versioned) {
            return Platform::Glibc { glibc, arch };
        }
        if let Some((musl, arch)) = tag.strip_prefix("musllinux_").and_then(versioned) {
            return Platform::Musl { musl, arch };
        }
        if let Some(arch) = tag.strip_prefix("linux_") {
            return Platform::Linux {
                arch: arch.to_string(),
            };
        }
        Platform::Other(tag.to_string())
    }

    /// Whether a system this platform describes installs a wheel for `other`.
    fn takes(&self, other: &Platform) -> bool {
        use Platform::*;
        match (self, other) {
            (_, Any) => true,
            (Glibc { glibc, arch }, Glibc { glibc: g, arch: a }) => a == arch && g <= glibc,
            (Musl { musl, arch }, Musl { musl: m, arch: a }) => a == arch && m <= musl,
            (Linux { arch }, Glibc { arch: a, .. } | Musl { arch: a, .. } | Linux { arch: a }) => {
                a == arch
            }
            (a, b) => a == b,
        }
    }
}

/// A lock file's packages, checked.
pub fn read(path: &Path) -> Result<Vec<Package>> {
    let shown = path.display().to_string();
    let text = read_text(path, Links::Follow, MAX_METADATA_BYTES, "lock file")?;
    let raw: RawLock =
        toml::from_str(&text).bad_at(&shown, "not a PEP 751 lock file (pylock.toml)")?;
    if raw.lock_version.split('.').next() != Some("1") {
        return Err(Error::bad(
            &shown,
            format!(
                "lock-version {:?}: only version 1 of PEP 751 is read",
                raw.lock_version
            ),
        ));
    }
    raw.packages
        .into_iter()
        .map(|p| package(&shown, p))
        .collect()
}

fn package(shown: &str, p: RawPackage) -> Result<Package> {
    check_dist_name(&p.name).bad_at(shown, "package name")?;
    if let Some(v) = &p.version {
        check_version(v).bad_at(shown, format_args!("{}: version", p.name))?;
    }
    let wheels = p
        .wheels
        .into_iter()
        .map(|w| wheel(shown, &p.name, w))
        .collect::<Result<Vec<_>>>()?;
    Ok(Package {
        name: p.name,
        version: p.version,
        wheels,
    })
}

fn wheel(shown: &str, package: &str, w: RawWheel) -> Result<Wheel> {
    // PEP 751: `name` is optional; the file name is then the last segment of the url or path.
    let file = w
        .name
        .as_deref()
        .or_else(|| w.url.as_deref().and_then(|u| u.rsplit('/').next()))
        .or_else(|| w.path.as_deref().and_then(|p| p.rsplit('/').next()))
        .unwrap_or_default();
    let tags = Tags::of_file_name(file).ok_or_else(|| {
        Error::bad(
            shown,
            format!("{package}: a wheel without a wheel file name (name, url or path)"),
        )
    })?;
    if let Some(size) = w.size.filter(|&s| s > MAX_WHEEL_BYTES) {
        return Err(Error::bad(
            shown,
            format!("{package}: a wheel size of {size} bytes; refusing"),
        ));
    }
    Ok(Wheel { tags, size: w.size })
}

pub use crate::input::pip::normalize;

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(file: &str) -> Tags {
        Tags::of_file_name(file).unwrap()
    }

    #[test]
    fn the_input_platform_takes_older_glibc_pure_and_abi3_wheels_only() {
        let torch = tags("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl");
        for takes in [
            "nvidia_cublas-13.1.0.3-py3-none-manylinux_2_27_x86_64.whl",
            "nvidia_nvtx-13.0.85-py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
            "filelock-4.3.2-py3-none-any.whl",
            "cuda_toolkit-13.0.2-py2.py3-none-any.whl",
            "x-1.0-cp39-abi3-manylinux2014_x86_64.whl",
            "markupsafe-3.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
        ] {
            assert!(torch.installs(&tags(takes)), "{takes}");
        }
        for refuses in [
            "x-1.0-py3-none-manylinux_2_34_x86_64.whl",
            "x-1.0-py3-none-manylinux_2_28_aarch64.whl",
            "x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "x-1.0-py3-none-win_amd64.whl",
            "x-1.0-py3-none-musllinux_1_2_x86_64.whl",
            "x-1.0-cp312-abi3-manylinux_2_28_x86_64.whl",
        ] {
            assert!(!torch.installs(&tags(refuses)), "{refuses}");
        }
    }

    #[test]
    fn file_names_that_are_not_wheels_have_no_tags() {
        assert_eq!(Tags::of_file_name("x-1.0.tar.gz"), None);
        assert_eq!(Tags::of_file_name("x-1.0-py3.whl"), None);
        assert_eq!(Tags::of_file_name("x-1.0-py3-none-a\u{1b}[31m.whl"), None);
        assert_eq!(normalize("Typing__Extensions.x"), "typing-extensions-x");
    }
}
