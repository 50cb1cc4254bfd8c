//! Device memory for cuda and hip runs: through the CUDA driver (cudarc,
//! loaded at run time) or the HIP runtime (libamdhip64, loaded at run time).
//! Host languages need none: their kernels work in the shared buffers
//! themselves (`buffers`).

use std::ffi::c_void;

use hpcagent_corpus::language::Language;

/// Why a device could not be opened or a call on it failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("the CUDA driver (libcuda.so) is not installed on this node")]
    NoCuda,
    #[error("the HIP runtime (libamdhip64.so) is not installed on this node")]
    NoHip,
    /// Opening the device: `what` of init, device 0, its context.
    #[error("CUDA {what}: {error:?}")]
    CudaOpen {
        what: &'static str,
        error: cudarc::driver::DriverError,
    },
    #[error("{call}: {error:?}")]
    Cuda {
        call: &'static str,
        error: cudarc::driver::DriverError,
    },
    #[error("{name}: {error}")]
    HipSymbol {
        name: &'static str,
        error: libloading::Error,
    },
    #[error("{name} failed with hipError {code}")]
    Hip { name: &'static str, code: i32 },
}

/// A buffer in device memory.
#[derive(Debug, Clone, Copy)]
pub struct Buffer {
    pub ptr: *mut c_void,
}

/// Allocation, copies and synchronization on one kind of device.
pub trait Device {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, DeviceError>;
    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), DeviceError>;
    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), DeviceError>;
    /// Waits until every call issued so far has finished.
    fn sync(&mut self) -> Result<(), DeviceError>;
    /// Marks the device's default stream before (`end` false) or after a
    /// call: the device's own time of the call, transfers apart.
    fn mark(&mut self, end: bool) -> Result<(), DeviceError>;
    /// Nanoseconds between the last two marks, once `sync` returned.
    fn marked_ns(&mut self) -> Result<u64, DeviceError>;
}

/// How many devices of a GPU language's kind this process sees: the error
/// says what is missing (the runtime, or a device for it). Host languages
/// need none and see 0.
pub fn count(language: Language) -> Result<usize, DeviceError> {
    match language {
        Language::C | Language::Cpp | Language::Fortran => Ok(0),
        Language::Cuda => {
            // SAFETY: only tries to dlopen the driver library (cudarc's
            // loaders panic when it is absent).
            if !unsafe { cudarc::driver::sys::is_culib_present() } {
                return Err(DeviceError::NoCuda);
            }
            let fail = |what, error| DeviceError::CudaOpen { what, error };
            cudarc::driver::result::init().map_err(|e| fail("init", e))?;
            let n =
                cudarc::driver::result::device::get_count().map_err(|e| fail("device count", e))?;
            Ok(n.max(0) as usize)
        }
        Language::Hip => {
            // SAFETY: loading the vendor runtime, as a hip run does.
            let lib = unsafe { libloading::Library::new("libamdhip64.so") }
                .map_err(|_| DeviceError::NoHip)?;
            let hip = Hip {
                lib,
                marks: [std::ptr::null_mut(); 2],
            };
            let mut n: i32 = 0;
            // SAFETY: hipGetDeviceCount writes one int.
            let counted = hip.call::<unsafe extern "C" fn(*mut i32) -> HipStatus>(
                "hipGetDeviceCount",
                |f| unsafe { f(&mut n) },
            );
            match counted {
                Ok(()) => Ok(n.max(0) as usize),
                // hipErrorNoDevice: the runtime is there, the device is not.
                Err(DeviceError::Hip { code: 100, .. }) => Ok(0),
                Err(e) => Err(e),
            }
        }
    }
}

/// The device a language's kernels use; `None` for host languages.
pub fn for_language(language: Language) -> Result<Option<Box<dyn Device>>, DeviceError> {
    match language {
        Language::C | Language::Cpp | Language::Fortran => Ok(None),
        Language::Cuda => Ok(Some(Box::new(Cuda::open()?))),
        Language::Hip => Ok(Some(Box::new(Hip::open()?))),
    }
}

/// Device memory through the CUDA driver API, in the device's primary context
/// (the one the CUDA runtime inside the submission also uses), and two
/// events that mark a call on its default stream.
pub struct Cuda {
    marks: [cudarc::driver::sys::CUevent; 2],
}

impl Cuda {
    fn open() -> Result<Cuda, DeviceError> {
        use cudarc::driver::result;
        // Check before any cudarc call: its loaders panic when the library is absent.
        // SAFETY: only tries to dlopen the driver library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(DeviceError::NoCuda);
        }
        let fail = |what, error| DeviceError::CudaOpen { what, error };
        result::init().map_err(|e| fail("init", e))?;
        let device = result::device::get(0).map_err(|e| fail("device 0", e))?;
        // SAFETY: the device handle is valid; the context is kept for the process.
        unsafe {
            let ctx = result::primary_ctx::retain(device).map_err(|e| fail("context", e))?;
            result::ctx::set_current(ctx).map_err(|e| fail("context", e))?;
        }
        let event = || {
            result::event::create(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| fail("event", e))
        };
        Ok(Cuda {
            marks: [event()?, event()?],
        })
    }
}

impl Device for Cuda {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, DeviceError> {
        if bytes == 0 {
            return Ok(Buffer {
                ptr: std::ptr::null_mut(),
            });
        }
        // SAFETY: a current context was set in `open`.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(|error| {
            DeviceError::Cuda {
                call: "cuMemAlloc",
                error,
            }
        })?;
        Ok(Buffer {
            ptr: ptr as usize as *mut c_void,
        })
    }

    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), DeviceError> {
        // SAFETY: dst is a device allocation of at least src.len() bytes.
        unsafe { cudarc::driver::result::memcpy_htod_sync(dst.ptr as usize as u64, src) }.map_err(
            |error| DeviceError::Cuda {
                call: "cuMemcpyHtoD",
                error,
            },
        )
    }

    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), DeviceError> {
        // SAFETY: src is a device allocation of at least dst.len() bytes.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(dst, src.ptr as usize as u64) }.map_err(
            |error| DeviceError::Cuda {
                call: "cuMemcpyDtoH",
                error,
            },
        )
    }

    fn sync(&mut self) -> Result<(), DeviceError> {
        cudarc::driver::result::ctx::synchronize().map_err(|error| DeviceError::Cuda {
            call: "cuCtxSynchronize",
            error,
        })
    }

    fn mark(&mut self, end: bool) -> Result<(), DeviceError> {
        // SAFETY: the event was made in this context; stream 0 is the
        // legacy default stream, which waits for every blocking stream.
        unsafe {
            cudarc::driver::result::event::record(
                self.marks[usize::from(end)],
                std::ptr::null_mut(),
            )
        }
        .map_err(|error| DeviceError::Cuda {
            call: "cuEventRecord",
            error,
        })
    }

    fn marked_ns(&mut self) -> Result<u64, DeviceError> {
        // SAFETY: both events were recorded, and the context synchronized.
        let ms = unsafe { cudarc::driver::result::event::elapsed(self.marks[0], self.marks[1]) }
            .map_err(|error| DeviceError::Cuda {
                call: "cuEventElapsedTime",
                error,
            })?;
        Ok((f64::from(ms) * 1e6) as u64)
    }
}

type HipStatus = i32;

/// Device memory through the HIP runtime, loaded at run time (no ROCm is
/// needed to build hpcagent).
pub struct Hip {
    lib: libloading::Library,
    /// Two `hipEvent_t`s that mark a call on the default stream.
    marks: [*mut c_void; 2],
}

impl Hip {
    fn open() -> Result<Hip, DeviceError> {
        // SAFETY: loading a library runs its initializers; libamdhip64 is the
        // vendor runtime the submission links against anyway.
        let lib = unsafe { libloading::Library::new("libamdhip64.so") }
            .map_err(|_| DeviceError::NoHip)?;
        let mut hip = Hip {
            lib,
            marks: [std::ptr::null_mut(); 2],
        };
        // SAFETY: hipSetDevice takes a device number.
        hip.call::<unsafe extern "C" fn(i32) -> HipStatus>("hipSetDevice", |f| unsafe { f(0) })?;
        let mut marks = [std::ptr::null_mut(); 2];
        for mark in &mut marks {
            hip.call::<unsafe extern "C" fn(*mut *mut c_void) -> HipStatus>(
                "hipEventCreate",
                |f| {
                    // SAFETY: hipEventCreate writes one handle to `mark`.
                    unsafe { f(mark) }
                },
            )?;
        }
        hip.marks = marks;
        Ok(hip)
    }

    fn call<F: Copy>(
        &self,
        name: &'static str,
        invoke: impl FnOnce(F) -> HipStatus,
    ) -> Result<(), DeviceError> {
        // SAFETY: the symbol is looked up with the signature HIP documents for it.
        let f = unsafe { self.lib.get::<F>(name.as_bytes()) }
            .map_err(|error| DeviceError::HipSymbol { name, error })?;
        match invoke(*f) {
            0 => Ok(()),
            code => Err(DeviceError::Hip { name, code }),
        }
    }
}

const HIP_HOST_TO_DEVICE: i32 = 1;
const HIP_DEVICE_TO_HOST: i32 = 2;

type HipMemcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32) -> HipStatus;

impl Device for Hip {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, DeviceError> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        if bytes > 0 {
            self.call::<unsafe extern "C" fn(*mut *mut c_void, usize) -> HipStatus>(
                "hipMalloc",
                // SAFETY: hipMalloc writes one pointer to `ptr`, which outlives the call.
                |f| unsafe { f(&mut ptr, bytes) },
            )?;
        }
        Ok(Buffer { ptr })
    }

    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), DeviceError> {
        // SAFETY: `dst` is a device buffer of at least `src.len()` bytes (one
        // per region, as large as its largest use); `src` is borrowed throughout.
        self.call::<HipMemcpy>("hipMemcpy", |f| unsafe {
            f(
                dst.ptr,
                src.as_ptr() as *const c_void,
                src.len(),
                HIP_HOST_TO_DEVICE,
            )
        })
    }

    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), DeviceError> {
        // SAFETY: as in `upload`, the other way: `src` holds `dst.len()` bytes,
        // and `dst` is borrowed mutably throughout.
        self.call::<HipMemcpy>("hipMemcpy", |f| unsafe {
            f(
                dst.as_mut_ptr() as *mut c_void,
                src.ptr,
                dst.len(),
                HIP_DEVICE_TO_HOST,
            )
        })
    }

    fn sync(&mut self) -> Result<(), DeviceError> {
        // SAFETY: hipDeviceSynchronize takes no arguments.
        self.call::<unsafe extern "C" fn() -> HipStatus>("hipDeviceSynchronize", |f| unsafe { f() })
    }

    fn mark(&mut self, end: bool) -> Result<(), DeviceError> {
        let event = self.marks[usize::from(end)];
        // SAFETY: an event this runtime made; stream 0 is the default stream.
        self.call::<unsafe extern "C" fn(*mut c_void, *mut c_void) -> HipStatus>(
            "hipEventRecord",
            |f| unsafe { f(event, std::ptr::null_mut()) },
        )
    }

    fn marked_ns(&mut self) -> Result<u64, DeviceError> {
        let mut ms: f32 = 0.0;
        let [start, end] = self.marks;
        self.call::<unsafe extern "C" fn(*mut f32, *mut c_void, *mut c_void) -> HipStatus>(
            "hipEventElapsedTime",
            |f| {
                // SAFETY: it writes one float; both events were recorded.
                unsafe { f(&mut ms, start, end) }
            },
        )?;
        Ok((f64::from(ms) * 1e6) as u64)
    }
}
