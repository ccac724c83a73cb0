//! The HIP runtime (through hip-sys, linked against `libamdhip64`): error codes as one-line
//! messages, the device probe, and owners of the raw resources (events, device and pinned
//! memory) that free them on drop.

use crate::error::{Error, Result};
use hip_sys::hiprt::{self, hipError_t};
use std::ffi::{c_int, c_void};

/// The runtime's name of a HIP error code (`hipErrorNoDevice`), as the message shows it.
pub(crate) fn code_name(e: hipError_t) -> String {
    format!("{e:?}")
}

/// `Ok` for `hipSuccess`, else an [`Error::Api`] naming `call` and the code.
pub(crate) fn check(call: &str, e: hipError_t) -> Result<()> {
    match e {
        hipError_t::hipSuccess => Ok(()),
        other => Err(Error::api(call, code_name(other))),
    }
}

/// The error for a failed `hipGetDeviceCount`: the codes that mean "no usable AMD GPU here"
/// become [`Error::NoDevice`], anything else stays an API error.
pub(crate) fn device_count_error(e: hipError_t) -> Error {
    match e {
        hipError_t::hipErrorNoDevice
        | hipError_t::hipErrorInsufficientDriver
        | hipError_t::hipErrorNotInitialized => Error::NoDevice {
            runtime: "ROCm",
            detail: format!("hipGetDeviceCount returned {}", code_name(e)),
        },
        other => Error::api("hipGetDeviceCount", code_name(other)),
    }
}

/// Number of visible AMD GPUs; no device is an error (one line), not 0.
pub(crate) fn device_count() -> Result<usize> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer for the duration of the call.
    let e = unsafe { hiprt::hipGetDeviceCount(&mut n) };
    if e != hipError_t::hipSuccess {
        return Err(device_count_error(e));
    }
    if n < 1 {
        return Err(Error::NoDevice {
            runtime: "ROCm",
            detail: "hipGetDeviceCount returned 0 devices".into(),
        });
    }
    Ok(n as usize)
}

/// A HIP event created with timing (`hipEventDefault`); destroyed on drop.
#[derive(Debug)]
pub struct Event(pub(crate) hiprt::hipEvent_t);

impl Event {
    /// A new timing event recorded on `stream`.
    pub(crate) fn record(stream: hiprt::hipStream_t) -> Result<Self> {
        let mut ev: hiprt::hipEvent_t = std::ptr::null_mut();
        // SAFETY: out-pointer valid for the call; the flags are a HIP constant.
        check("hipEventCreateWithFlags", unsafe {
            hiprt::hipEventCreateWithFlags(&mut ev, hiprt::hipEventDefault)
        })?;
        let ev = Event(ev);
        // SAFETY: `ev` was just created; `stream` belongs to the current device.
        check("hipEventRecord", unsafe {
            hiprt::hipEventRecord(ev.0, stream)
        })?;
        Ok(ev)
    }

    /// Milliseconds from `self` to `end` (both completed).
    pub(crate) fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        let mut ms = 0f32;
        // SAFETY: both events are live and were recorded; `ms` is a valid out-pointer.
        check("hipEventElapsedTime", unsafe {
            hiprt::hipEventElapsedTime(&mut ms, self.0, end.0)
        })?;
        Ok(f64::from(ms))
    }

    /// Block the host until the event has completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is live and was recorded.
        check("hipEventSynchronize", unsafe {
            hiprt::hipEventSynchronize(self.0)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by hipEventCreateWithFlags and destroyed only here.
        let _ = unsafe { hiprt::hipEventDestroy(self.0) };
    }
}

/// Device memory (`hipMalloc`, zeroed); freed on drop.
pub(crate) struct DeviceBuf(pub *mut c_void);

impl DeviceBuf {
    pub(crate) fn zeroed(bytes: usize) -> Result<Self> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer valid for the call.
        check(&format!("hipMalloc {bytes} bytes"), unsafe {
            hiprt::hipMalloc(&mut p, bytes)
        })?;
        let buf = DeviceBuf(p);
        // SAFETY: `p` holds `bytes` bytes of device memory (synchronous memset).
        check("hipMemset", unsafe { hiprt::hipMemset(buf.0, 0, bytes) })?;
        Ok(buf)
    }
}

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by hipMalloc and freed only here, after the device synchronized.
        let _ = unsafe { hiprt::hipFree(self.0) };
    }
}

/// Page-locked host memory (`hipHostMalloc`, default flags); freed on drop.
pub(crate) struct PinnedBuf(pub *mut c_void);

impl PinnedBuf {
    pub(crate) fn new(bytes: usize) -> Result<Self> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer valid for the call.
        check(&format!("hipHostMalloc {bytes} bytes"), unsafe {
            hiprt::hipHostMalloc(&mut p, bytes, hiprt::hipHostMallocDefault)
        })?;
        Ok(PinnedBuf(p))
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by hipHostMalloc and freed only here, after the device synchronized.
        let _ = unsafe { hiprt::hipHostFree(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_is_one_clear_line() {
        let e = device_count_error(hipError_t::hipErrorNoDevice);
        assert_eq!(
            e.to_string(),
            "no ROCm GPU: hipGetDeviceCount returned hipErrorNoDevice"
        );
        assert!(matches!(e, Error::NoDevice { .. }));
        let e = device_count_error(hipError_t::hipErrorInvalidValue);
        assert_eq!(
            e.to_string(),
            "hipGetDeviceCount failed: hipErrorInvalidValue"
        );
    }

    #[test]
    fn codes_map_to_messages() {
        assert!(check("hipMalloc", hipError_t::hipSuccess).is_ok());
        let e = check("hipMalloc 64 bytes", hipError_t::hipErrorOutOfMemory).unwrap_err();
        assert_eq!(
            e.to_string(),
            "hipMalloc 64 bytes failed: hipErrorOutOfMemory"
        );
        assert_eq!(
            code_name(hipError_t::hipErrorInvalidDevice),
            "hipErrorInvalidDevice"
        );
    }

    #[test]
    fn this_machine_has_no_amd_gpu() {
        // The real runtime call: libamdhip64 is linked; without /dev/kfd it reports no device.
        if std::path::Path::new("/dev/kfd").exists() {
            return;
        }
        let e = device_count().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("no ROCm GPU: hipGetDeviceCount returned "),
            "{e}"
        );
    }
}
