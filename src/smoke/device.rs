//! The CUDA device probe (driver version, device name, compute capability) through cudarc with
//! dynamic loading, and the hook for the device-code check (SASS/PTX for that capability).
//!
//! Nothing here links against CUDA: `libcuda.so.1` is opened at run time, so the binary starts
//! on a machine without a driver and says why it stops.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::eval::CheckStatus;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: i32,
    /// Devices the driver sees (after CUDA_VISIBLE_DEVICES).
    pub count: i32,
    /// `cuDriverGetVersion`, e.g. 13000.
    pub driver_version: i32,
    /// The same as `13.0`: the newest CUDA version this driver supports.
    pub driver_cuda: String,
    pub name: String,
    /// `9.0` for an H200.
    pub compute_capability: String,
    pub sm: String,
}

/// Why there is no usable GPU; the CLI prints it as `no CUDA driver: …` / `no CUDA device: …`.
#[derive(Debug, Clone)]
pub enum NoDevice {
    Driver(String),
    Device(String),
}

impl std::fmt::Display for NoDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoDevice::Driver(s) => write!(f, "no CUDA driver: {s}"),
            NoDevice::Device(s) => write!(f, "no CUDA device: {s}"),
        }
    }
}

/// dlopen the driver ourselves first: cudarc panics when the library is missing, and dlerror()
/// says more than its panic message.
fn driver_loadable() -> Result<(), String> {
    use std::ffi::{CStr, CString};
    let mut first: Option<String> = None;
    for name in ["libcuda.so.1", "libcuda.so"] {
        let c = CString::new(name).expect("no NUL");
        // SAFETY: plain dlopen/dlclose of a system library name; the handle is not used after close.
        unsafe {
            let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if !h.is_null() {
                libc::dlclose(h);
                return Ok(());
            }
            let e = libc::dlerror();
            let msg = if e.is_null() { format!("{name}: cannot be loaded") } else { CStr::from_ptr(e).to_string_lossy().into_owned() };
            first.get_or_insert(msg);
        }
    }
    Err(first.unwrap_or_default())
}

/// Probe device `ordinal`. Never panics: cudarc's panics (missing library or symbol) are caught
/// and turned into `NoDevice::Driver`.
pub fn probe(ordinal: i32) -> Result<DeviceInfo, NoDevice> {
    driver_loadable().map_err(NoDevice::Driver)?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| probe_inner(ordinal));
    std::panic::set_hook(hook);
    match result {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the CUDA driver library could not be used".into());
            Err(NoDevice::Driver(msg))
        }
    }
}

fn probe_inner(ordinal: i32) -> Result<DeviceInfo, NoDevice> {
    use cudarc::driver::{result, sys};
    let derr = |what: &str, e: result::DriverError| format!("{what}: {e:?}");
    result::init().map_err(|e| NoDevice::Device(derr("cuInit", e)))?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(|e| NoDevice::Driver(derr("cuDriverGetVersion", e)))?;
    let count = result::device::get_count().map_err(|e| NoDevice::Device(derr("cuDeviceGetCount", e)))?;
    if count <= ordinal {
        return Err(NoDevice::Device(format!("the driver sees {count} device(s); device {ordinal} does not exist")));
    }
    let dev = result::device::get(ordinal).map_err(|e| NoDevice::Device(derr("cuDeviceGet", e)))?;
    let name = result::device::get_name(dev).map_err(|e| NoDevice::Device(derr("cuDeviceGetName", e)))?;
    let attr = |a: sys::CUdevice_attribute| {
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { result::device::get_attribute(dev, a) }.map_err(|e| NoDevice::Device(derr("cuDeviceGetAttribute", e)))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(DeviceInfo {
        ordinal,
        count,
        driver_version: version,
        driver_cuda: format!("{}.{}", version / 1000, (version % 1000) / 10),
        name,
        compute_capability: format!("{major}.{minor}"),
        sm: format!("sm_{major}{minor}"),
    })
}

/// The result of checking a variant's CUDA libraries for code that runs on the device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceCheck {
    pub status: CheckStatus,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence: Option<String>,
    /// Per library: which SASS and PTX targets it carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryDeviceCode>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibraryDeviceCode {
    pub file: String,
    /// SASS architectures, e.g. `sm_90`.
    pub sass: Vec<String>,
    /// PTX virtual architectures, e.g. `compute_90`.
    pub ptx: Vec<String>,
    /// SASS for the device's capability, or PTX at or below it the driver can JIT.
    pub runs_on_device: bool,
}

/// Check that every library in `libraries` that carries device code has, for each of its fat
/// binaries, SASS for `sm` (e.g. `sm_90`) or PTX the driver can JIT for it (`splitpkg::fatbin`
/// reads the headers only). Libraries without `.nv_fatbin` are skipped; `None` when none has any.
///
/// Only the variant's own libraries (those in `own_dir`, the lazy library's directory) are judged:
/// the CUDA dependency wheels are reported alongside.
pub fn device_code_check(libraries: &[PathBuf], own_dir: Option<&Path>, sm: &str) -> Option<DeviceCheck> {
    use crate::fatbin::{self, Kind, Runs};
    let device: fatbin::Capability = sm.parse().ok()?;
    let mut out = Vec::new();
    let mut failing = Vec::new();
    let mut partial = Vec::new();
    let mut stubs = Vec::new();
    let mut unreadable = Vec::new();
    for lib in libraries {
        let Ok(map) = crate::input::map_file(lib) else { continue };
        let Ok(view) = crate::elf::ElfView::parse(&map) else { continue };
        let summary = match fatbin::read(&view) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                unreadable.push(format!("{}: {e}", lib.display()));
                continue;
            }
        };
        let verdict = fatbin::device_check(&summary, device);
        let names = |kind: Kind| -> Vec<String> {
            let mut v: Vec<String> = summary.targets.iter().filter(|t| t.kind == kind).map(|t| t.name.clone()).collect();
            v.dedup();
            v
        };
        // A library runs on the device when some of its fat binaries have SASS or PTX for it:
        // cuBLAS, cuDNN and friends ship arch-specific kernels in containers of their own (an
        // sm_100a-only container is never launched on sm_90), so "every container" is too strict.
        let runs = verdict.sass + verdict.jit > 0;
        let own = own_dir.is_none_or(|d| lib.parent() == Some(d));
        if !runs && !own {
            // A CUDA dependency wheel: some (cuFFT) register only a stub fat binary and load their
            // kernels by other means, so its registered device code is reported, not judged.
            stubs.push(format!(
                "{} ({} fat binaries, none for {sm})",
                lib.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                verdict.containers
            ));
        }
        if runs && verdict.runs == Runs::No {
            partial.push(format!(
                "{} ({} of {} fat binaries have no code for {sm}: kernels for other GPUs)",
                lib.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                verdict.none,
                verdict.containers
            ));
        }
        if !runs && own {
            failing.push(lib.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        }
        out.push(LibraryDeviceCode {
            file: lib.display().to_string(),
            sass: names(Kind::Elf),
            ptx: names(Kind::Ptx).into_iter().map(|n| n.replacen("sm_", "compute_", 1)).collect(),
            runs_on_device: runs,
        });
    }
    if out.is_empty() && unreadable.is_empty() {
        return None;
    }
    let status = if failing.is_empty() && unreadable.is_empty() { CheckStatus::Pass } else { CheckStatus::Fail };
    let detail = format!(
        "{} of {} libraries with device code carry SASS or PTX for {sm}{}{}{}",
        out.iter().filter(|l| l.runs_on_device).count(),
        out.len(),
        if partial.is_empty() { String::new() } else { format!("; arch-specific kernels elsewhere: {}", partial.join(", ")) },
        if stubs.is_empty() {
            String::new()
        } else {
            format!(
                "; dependencies whose registered device code has nothing for {sm} (not judged: they may load kernels otherwise): {}",
                stubs.join(", ")
            )
        },
        if unreadable.is_empty() { String::new() } else { format!("; unreadable: {}", unreadable.join("; ")) }
    );
    let consequence = (!failing.is_empty())
        .then(|| format!("kernels in {} have neither SASS for {sm} nor PTX to JIT: they fail to launch on this GPU", failing.join(", ")));
    Some(DeviceCheck { status, detail, consequence, libraries: out })
}

/// The CUDA libraries of a variant: every shared object next to the lazy library, plus the pip
/// `nvidia/*/lib` directories of a wheel install.
pub fn variant_libraries(lazy_dir: &Path, site_packages: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut add_dir = |d: &Path| {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut v: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains(".so")))
                .collect();
            v.sort();
            out.extend(v);
        }
    };
    add_dir(lazy_dir);
    if let Some(sp) = site_packages
        && let Ok(rd) = std::fs::read_dir(sp.join("nvidia"))
    {
        let mut dirs: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path().join("lib")).filter(|p| p.is_dir()).collect();
        dirs.sort();
        for d in dirs {
            add_dir(&d);
        }
    }
    out
}
