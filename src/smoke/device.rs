//! The CUDA device probe (driver version, device name, compute capability) through cudarc with
//! dynamic loading, and the hook for the device-code check (SASS/PTX for that capability).
//!
//! Nothing here links against CUDA: `libcuda.so.1` is opened at run time, so the binary starts
//! on a machine without a driver and says why it stops.

use serde::{Deserialize, Serialize};

/// The GPU the run used, as the CUDA driver API describes it (probed once, before any variant).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct DeviceInfo {
    /// The CUDA device index probed and used: always 0, the first device the driver sees.
    pub ordinal: i32,
    /// Devices the driver sees (after CUDA_VISIBLE_DEVICES).
    pub count: i32,
    /// `cuDriverGetVersion`, e.g. 13000: the CUDA API version the driver supports, not its own.
    pub driver_version: i32,
    /// The same as `13.0`: the newest CUDA version this driver supports.
    pub driver_cuda: String,
    /// The driver's own version, `580.159.04` (the kernel module's, from
    /// `/proc/driver/nvidia/version`, as `nvidia-smi` reports it). Absent in older smoke JSON and
    /// where the file is not there (a container without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The device's name from `cuDeviceGetName`, e.g. `NVIDIA H200`.
    pub name: String,
    /// `9.0` for an H200.
    pub compute_capability: String,
    /// The compute capability as an SM target, `sm_90` for 9.0: what the device-code check
    /// looks for.
    pub sm: String,
}

impl DeviceInfo {
    /// `driver 580.159.04 (CUDA 13.0)`. `driver_version` (13000) is the CUDA API version the
    /// driver supports, never shown as the driver's: without `driver` the text says it was not
    /// recorded.
    pub fn driver_text(&self) -> String {
        match &self.driver {
            Some(d) => format!("driver {d} (CUDA {})", self.driver_cuda),
            None => format!("driver version not recorded (CUDA {})", self.driver_cuda),
        }
    }
}

/// Why there is no usable GPU; the CLI prints it as `no CUDA driver: …` / `no CUDA device: …`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoDevice {
    /// The driver library cannot be loaded or used (not installed, no GPU build, a driver call
    /// failed); the reason follows.
    #[error("no CUDA driver: {0}")]
    Driver(String),
    /// The driver works but gives no usable device (initialisation failed, none at that ordinal);
    /// the reason follows.
    #[error("no CUDA device: {0}")]
    Device(String),
}

/// The driver library could not be opened: dlerror()'s message for the first name tried.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
struct DriverNotLoadable(String);

/// dlopen the driver ourselves first: cudarc panics when the library is missing, and dlerror()
/// says more than its panic message.
fn driver_loadable() -> Result<(), DriverNotLoadable> {
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
            let msg = if e.is_null() {
                format!("{name}: cannot be loaded")
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            };
            first.get_or_insert(msg);
        }
    }
    Err(DriverNotLoadable(first.unwrap_or_default()))
}

/// Probe device `ordinal`. Never panics: cudarc's panics (missing library or symbol) are caught
/// and turned into `NoDevice::Driver`.
pub fn probe(ordinal: i32) -> Result<DeviceInfo, NoDevice> {
    if cfg!(not(feature = "gpu")) {
        return Err(NoDevice::Driver(
            "this splitpkg was built without the `gpu` feature (no CUDA driver probe)".into(),
        ));
    }
    driver_loadable().map_err(|e| NoDevice::Driver(e.0))?;
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

#[cfg(not(feature = "gpu"))]
fn probe_inner(_ordinal: i32) -> Result<DeviceInfo, NoDevice> {
    unreachable!("probe returns before probing without the gpu feature")
}

#[cfg(feature = "gpu")]
fn probe_inner(ordinal: i32) -> Result<DeviceInfo, NoDevice> {
    use cudarc::driver::{result, sys};
    let derr = |what: &str, e: result::DriverError| format!("{what}: {e:?}");
    result::init().map_err(|e| NoDevice::Device(derr("cuInit", e)))?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| NoDevice::Driver(derr("cuDriverGetVersion", e)))?;
    let count =
        result::device::get_count().map_err(|e| NoDevice::Device(derr("cuDeviceGetCount", e)))?;
    if count <= ordinal {
        return Err(NoDevice::Device(format!(
            "the driver sees {count} device(s); device {ordinal} does not exist"
        )));
    }
    let dev = result::device::get(ordinal).map_err(|e| NoDevice::Device(derr("cuDeviceGet", e)))?;
    let name =
        result::device::get_name(dev).map_err(|e| NoDevice::Device(derr("cuDeviceGetName", e)))?;
    let attr = |a: sys::CUdevice_attribute| {
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { result::device::get_attribute(dev, a) }
            .map_err(|e| NoDevice::Device(derr("cuDeviceGetAttribute", e)))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok(DeviceInfo {
        ordinal,
        count,
        driver_version: version,
        driver_cuda: format!("{}.{}", version / 1000, (version % 1000) / 10),
        driver: driver_release(),
        name,
        compute_capability: format!("{major}.{minor}"),
        sm: format!("sm_{major}{minor}"),
    })
}

/// Where the loaded NVIDIA kernel module states its version.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
const NVRM_VERSION: &str = "/proc/driver/nvidia/version";

/// The driver's version (`580.159.04`) from [`NVRM_VERSION`]; `None` when it cannot be read. A
/// regular file is required before it is opened, and at most 4 KiB are read.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
#[allow(clippy::disallowed_methods)] // why: the kernel's /proc file, not user input: checked regular first and read at most 4 KiB.
fn driver_release() -> Option<String> {
    use std::io::Read;
    if !std::fs::metadata(NVRM_VERSION).ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(NVRM_VERSION)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    parse_nvrm(&text)
}

/// The version in the `NVRM version:` line: its first token of dot-separated numbers.
pub fn parse_nvrm(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|t| {
            t.contains('.')
                && t.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::parse_nvrm;

    #[test]
    fn the_driver_version_is_read_from_the_nvrm_line() {
        // The two forms the file takes: the proprietary and the open kernel module.
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Sep 18 21:05:37 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(parse_nvrm(closed).as_deref(), Some("580.159.04"));
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n";
        assert_eq!(parse_nvrm(open).as_deref(), Some("570.86.15"));
        assert_eq!(parse_nvrm("GCC version: 12.2.0\n"), None);
        assert_eq!(parse_nvrm("NVRM version: garbage\n"), None);
    }
}
