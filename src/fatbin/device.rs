//! Can a library's device code run on a given GPU?
//!
//! The rule implemented (CUDA Programming Guide, "Binary Compatibility" and "PTX Compatibility";
//! PTX ISA, "Target architectures with suffix a"):
//!
//! - A cubin (SASS) for `sm_XY` runs on devices of compute capability `X.Z` with `Z >= Y`: same
//!   major, same or higher minor. An arch-specific cubin (`sm_XYa`, flag `0x100000`) runs only on
//!   `X.Y` exactly.
//! - PTX for `compute_XY` can be JIT-compiled by the driver for any device of capability `>= X.Y`;
//!   arch-specific PTX (`compute_XYa`) only for `X.Y` exactly.
//!
//! The CUDA runtime registers each container separately, and a kernel whose container has no
//! usable entry fails with "no kernel image is available"; so a library runs on a device only when
//! *every* container has a usable entry. Family-specific targets (`sm_100f`, CUDA 12.9) are not
//! distinguished in the headers seen so far and are treated as plain targets.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Container, FatbinEntry, FatbinSummary, Kind, arch_name};

/// A device's compute capability, e.g. 9.0 for an H100 (`sm_90`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capability {
    /// The major version (9 of sm_90).
    pub major: u32,
    /// The minor version (0 of sm_90).
    pub minor: u32,
}

impl Capability {
    /// The capability of architecture number `arch` (`90` → 9.0).
    pub fn from_arch(arch: u32) -> Self {
        Capability {
            major: arch / 10,
            minor: arch % 10,
        }
    }

    /// The architecture number (9.0 → `90`).
    pub fn arch(self) -> u32 {
        self.major * 10 + self.minor
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.arch())
    }
}

crate::string_form!(Capability, "Capability", "^sm_[0-9]+$");

/// An argument that is not a compute capability (`--device`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a compute capability: {0:?} (expected sm_XY, e.g. sm_90 or sm_120, or X.Y)")]
pub struct BadCapability(pub String);

/// Accepts `sm_90`, `sm_90a` (a device has no suffix; it is ignored), `compute_90`, `90` and `9.0`.
impl FromStr for Capability {
    type Err = BadCapability;
    fn from_str(s: &str) -> Result<Self, BadCapability> {
        let bad = || BadCapability(s.to_string());
        let t = s.trim().to_ascii_lowercase();
        if let Some((ma, mi)) = t.split_once('.') {
            let (major, minor) = (
                ma.parse::<u32>().map_err(|_| bad())?,
                mi.parse::<u32>().map_err(|_| bad())?,
            );
            if minor > 9 || major == 0 || major > 99 {
                return Err(bad());
            }
            return Ok(Capability { major, minor });
        }
        let digits = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("compute_"))
            .unwrap_or(&t);
        let digits = digits.strip_suffix(['a', 'f']).unwrap_or(digits);
        if digits.len() < 2 || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let arch: u32 = digits.parse().map_err(|_| bad())?;
        if arch < 10 {
            return Err(bad());
        }
        Ok(Capability::from_arch(arch))
    }
}

/// Whether code of this kind and target can run on `dev`, and how.
pub fn fits(kind: Kind, arch: u32, arch_specific: bool, dev: Capability) -> Option<ContainerFit> {
    let own = Capability::from_arch(arch);
    match kind {
        Kind::Elf => {
            let ok = own.major == dev.major
                && if arch_specific {
                    own.minor == dev.minor
                } else {
                    own.minor <= dev.minor
                };
            ok.then_some(ContainerFit::Sass)
        }
        Kind::Ptx => {
            let ok = if arch_specific {
                own == dev
            } else {
                own <= dev
            };
            ok.then_some(ContainerFit::Jit)
        }
        Kind::Other => None,
    }
}

/// How the entry runs on `dev`: as SASS, through PTX JIT, or None when it cannot.
pub fn entry_fits(e: &FatbinEntry, dev: Capability) -> Option<ContainerFit> {
    fits(e.kind, e.arch, e.arch_specific, dev)
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
/// How the best entry of a container runs on a device.
#[serde(rename_all = "lowercase")]
pub enum ContainerFit {
    /// A cubin for this device (or an older minor of its major).
    Sass,
    /// Only PTX: the driver JIT-compiles it at first use (slow start, needs a new enough driver).
    Jit,
    /// Nothing in the container runs on the device: its kernels fail to launch.
    None,
}

fn container_fit(c: &Container, dev: Capability) -> (ContainerFit, Option<&FatbinEntry>) {
    let mut best: Option<(&FatbinEntry, ContainerFit)> = None;
    for e in &c.entries {
        let Some(fit) = entry_fits(e, dev) else {
            continue;
        };
        // Prefer SASS over PTX, then the exact architecture, then the newest older one.
        let key = |e: &FatbinEntry, f: ContainerFit| {
            (f == ContainerFit::Sass, e.arch == dev.arch(), e.arch)
        };
        if best.is_none_or(|(b, bf)| key(e, fit) > key(b, bf)) {
            best = Some((e, fit));
        }
    }
    match best {
        Some((e, f)) => (f, Some(e)),
        None => (ContainerFit::None, None),
    }
}

/// Whether a library's device code runs on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Runs {
    /// Every container has SASS for the device.
    Yes,
    /// Every container can run, some only through PTX JIT.
    Jit,
    /// Some containers have nothing for the device: their kernels fail to launch.
    No,
}

/// Per library: can its device code run on `device`?
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceVerdict {
    /// The compute capability checked, as `sm_XY`.
    pub device: Capability,
    /// `yes` when every container has SASS for it, `jit` when some have only PTX, `no` when some
    /// have neither.
    pub runs: Runs,
    /// Containers checked: `sass + jit + none`, every container of the library.
    pub containers: u64,
    /// Containers with SASS for the device.
    pub sass: u64,
    /// Containers with no SASS for the device but PTX the driver can JIT-compile for it.
    pub jit: u64,
    /// Containers with nothing for the device: their kernels fail to launch.
    pub none: u64,
    /// Which target each usable container would load, with container counts (`sm_86` × 443).
    pub via: Vec<Via>,
    /// File offsets of the first containers with nothing for the device (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_examples: Vec<u64>,
}

/// A target that containers would load on the device, and how many.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct Via {
    /// `elf` (SASS, loaded as is) or `ptx` (JIT-compiled by the driver).
    pub kind: Kind,
    /// The target's name, `sm_86` or `sm_90a` (PTX too is named `sm_…`, not `compute_…`).
    pub name: String,
    /// Containers that would load this target (each container loads one).
    pub containers: u64,
}

/// Needs the per-container layout (`FatbinSummary::containers`); with it dropped, the verdict is
/// computed from the per-target table and is exact only when every target is in every container.
pub fn device_check(s: &FatbinSummary, device: Capability) -> DeviceVerdict {
    let mut v = DeviceVerdict {
        device,
        runs: Runs::Yes,
        containers: 0,
        sass: 0,
        jit: 0,
        none: 0,
        via: Vec::new(),
        missing_examples: Vec::new(),
    };
    let mut add_via = |kind: Kind, name: String, n: u64| match v
        .via
        .iter_mut()
        .find(|x| x.kind == kind && x.name == name)
    {
        Some(x) => x.containers += n,
        None => v.via.push(Via {
            kind,
            name,
            containers: n,
        }),
    };
    let mut missing = Vec::new();
    let (mut sass, mut jit, mut none) = (0, 0, 0);
    if !s.containers.is_empty() || s.container_count == 0 {
        for c in &s.containers {
            match container_fit(c, device) {
                (ContainerFit::Sass, Some(e)) => {
                    sass += 1;
                    add_via(e.kind, e.name(), 1);
                }
                (ContainerFit::Jit, Some(e)) => {
                    jit += 1;
                    add_via(e.kind, e.name(), 1);
                }
                _ => {
                    none += 1;
                    if missing.len() < 8 {
                        missing.push(c.offset);
                    }
                }
            }
        }
    } else {
        // Compact summary: the best target present in all containers decides for all of them.
        let best = |kind: Kind| {
            s.targets
                .iter()
                .filter(|t| t.kind == kind)
                .filter(|t| fits(t.kind, t.arch, t.arch_specific, device).is_some())
                .max_by_key(|t| (t.containers, t.arch == device.arch(), t.arch))
                .map(|t| (t.containers, arch_name(t.arch, t.arch_specific)))
        };
        // Without the layout, coverage beyond one target is unknown: count the rest as missing.
        let n = s.container_count;
        match (best(Kind::Elf), best(Kind::Ptx)) {
            (Some((c, name)), ptx) if c >= n || ptx.as_ref().is_none_or(|p| p.0 <= c) => {
                sass = c.min(n);
                none = n - sass;
                add_via(Kind::Elf, name, sass);
            }
            (_, Some((c, name))) => {
                jit = c.min(n);
                none = n - jit;
                add_via(Kind::Ptx, name, jit);
            }
            _ => none = n,
        }
    }
    v.via
        .sort_by(|a, b| b.containers.cmp(&a.containers).then(a.name.cmp(&b.name)));
    v.containers = sass + jit + none;
    v.sass = sass;
    v.jit = jit;
    v.none = none;
    v.missing_examples = missing;
    v.runs = if none > 0 {
        Runs::No
    } else if jit > 0 {
        Runs::Jit
    } else {
        Runs::Yes
    };
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_capability() {
        assert_eq!(
            "sm_90".parse::<Capability>().unwrap(),
            Capability { major: 9, minor: 0 }
        );
        assert_eq!(
            "sm_120".parse::<Capability>().unwrap(),
            Capability {
                major: 12,
                minor: 0
            }
        );
        assert_eq!(
            "sm_103a".parse::<Capability>().unwrap(),
            Capability {
                major: 10,
                minor: 3
            }
        );
        assert_eq!(
            "8.6".parse::<Capability>().unwrap(),
            Capability { major: 8, minor: 6 }
        );
        assert_eq!(
            "compute_75".parse::<Capability>().unwrap().to_string(),
            "sm_75"
        );
        for bad in ["", "sm_", "sm_9", "gpu", "sm_1234", "8.10", "sm_90x"] {
            assert!(bad.parse::<Capability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn compatibility_rule() {
        let d = |s: &str| s.parse::<Capability>().unwrap();
        // SASS: same major, minor >= own.
        assert!(fits(Kind::Elf, 80, false, d("sm_86")).is_some());
        assert!(fits(Kind::Elf, 86, false, d("sm_80")).is_none());
        assert!(fits(Kind::Elf, 90, false, d("sm_100")).is_none());
        assert!(fits(Kind::Elf, 100, false, d("sm_103")).is_some());
        assert!(fits(Kind::Elf, 120, false, d("sm_121")).is_some());
        // Arch-specific SASS: exactly that arch.
        assert!(fits(Kind::Elf, 100, true, d("sm_100")).is_some());
        assert!(fits(Kind::Elf, 100, true, d("sm_103")).is_none());
        // PTX: anything newer, arch-specific PTX only its own arch.
        assert_eq!(
            fits(Kind::Ptx, 80, false, d("sm_120")),
            Some(ContainerFit::Jit)
        );
        assert!(fits(Kind::Ptx, 90, false, d("sm_86")).is_none());
        assert!(fits(Kind::Ptx, 90, true, d("sm_100")).is_none());
    }
}
