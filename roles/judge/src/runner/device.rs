//! Where a run's buffers live: host memory for c, cpp and fortran; device
//! memory through the CUDA driver (cudarc, loaded at run time) or the HIP
//! runtime (libamdhip64, loaded at run time) for cuda and hip.
//!
//! Host buffers of 4 MiB or more are 2 MiB-aligned with transparent huge
//! pages requested, the way NumPy's arrays get them (its threshold too):
//! the baseline and every submission see the same memory system, so a
//! speedup is not an allocator artefact. Smaller buffers get ordinary
//! pages, as in NumPy: a huge page would be zeroed whole at first touch
//! (2 MiB for a 100 KB array) in every run.

use std::ffi::c_void;

use crate::language::Language;

/// A buffer in the memory the kernel reads: a host pointer or a device address.
#[derive(Debug, Clone, Copy)]
pub struct Buffer {
    pub ptr: *mut c_void,
    pub bytes: usize,
}

/// Allocation, copies and synchronization for one kind of memory.
pub trait Memory {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, String>;
    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), String>;
    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), String>;
    /// Waits until every call issued so far has finished.
    fn sync(&mut self) -> Result<(), String>;
    /// Host memory can be read in place; device memory must be downloaded.
    fn host_view(&self, buffer: Buffer) -> Option<&[u8]>;
}

/// The memory a language's kernels use.
pub fn for_language(language: Language) -> Result<Box<dyn Memory>, String> {
    match language {
        Language::C | Language::Cpp | Language::Fortran => Ok(Box::new(Host)),
        Language::Cuda => Ok(Box::new(Cuda::open()?)),
        Language::Hip => Ok(Box::new(Hip::open()?)),
    }
}

const HUGE_PAGE: usize = 2 << 20;
/// NumPy asks for huge pages from this size on (`indicate_hugepages`).
const HUGE_PAGES_FROM: usize = 4 << 20;

/// Host memory from `mmap`, released when the process ends.
#[derive(Debug)]
pub struct Host;

impl Memory for Host {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, String> {
        if bytes == 0 {
            return Ok(Buffer {
                ptr: std::ptr::null_mut(),
                bytes: 0,
            });
        }
        let failed = |e| format!("cannot allocate {bytes} bytes: {e}");
        if bytes < HUGE_PAGES_FROM {
            return Ok(Buffer {
                ptr: map(bytes).map_err(failed)?,
                bytes,
            });
        }
        let rounded = bytes.div_ceil(HUGE_PAGE) * HUGE_PAGE;
        // Over-allocate by one huge page so the start can be aligned to one.
        let base = map(rounded + HUGE_PAGE).map_err(failed)?;
        let aligned = (base as usize).div_ceil(HUGE_PAGE) * HUGE_PAGE;
        // SAFETY: [aligned, aligned + rounded) lies inside the mapping.
        unsafe { libc::madvise(aligned as *mut c_void, rounded, libc::MADV_HUGEPAGE) };
        Ok(Buffer {
            ptr: aligned as *mut c_void,
            bytes,
        })
    }

    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), String> {
        debug_assert!(src.len() <= dst.bytes);
        // SAFETY: dst holds at least src.len() bytes; the regions are distinct.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.ptr as *mut u8, src.len()) };
        Ok(())
    }

    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), String> {
        // SAFETY: src holds at least dst.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.ptr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn sync(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn host_view(&self, buffer: Buffer) -> Option<&[u8]> {
        if buffer.bytes == 0 {
            return Some(&[]);
        }
        // SAFETY: the mapping lives until the process exits.
        Some(unsafe { std::slice::from_raw_parts(buffer.ptr as *const u8, buffer.bytes) })
    }
}

/// An anonymous private mapping of `bytes`, released when the process ends.
fn map(bytes: usize) -> std::io::Result<*mut c_void> {
    // SAFETY: anonymous private mapping; checked for failure below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(base)
}

/// Device memory through the CUDA driver API, in the device's primary context
/// (the one the CUDA runtime inside the submission also uses).
pub struct Cuda;

impl Cuda {
    fn open() -> Result<Cuda, String> {
        use cudarc::driver::result;
        // Check before any cudarc call: its loaders panic when the library is absent.
        // SAFETY: only tries to dlopen the driver library.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("the CUDA driver (libcuda.so) is not installed on this node".into());
        }
        let fail = |what: &str, e: cudarc::driver::DriverError| format!("CUDA {what}: {e:?}");
        result::init().map_err(|e| fail("init", e))?;
        let device = result::device::get(0).map_err(|e| fail("device 0", e))?;
        // SAFETY: the device handle is valid; the context is kept for the process.
        unsafe {
            let ctx = result::primary_ctx::retain(device).map_err(|e| fail("context", e))?;
            result::ctx::set_current(ctx).map_err(|e| fail("context", e))?;
        }
        Ok(Cuda)
    }
}

impl Memory for Cuda {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, String> {
        if bytes == 0 {
            return Ok(Buffer {
                ptr: std::ptr::null_mut(),
                bytes: 0,
            });
        }
        // SAFETY: a current context was set in `open`.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(bytes) }
            .map_err(|e| format!("cuMemAlloc: {e:?}"))?;
        Ok(Buffer {
            ptr: ptr as usize as *mut c_void,
            bytes,
        })
    }

    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), String> {
        // SAFETY: dst is a device allocation of at least src.len() bytes.
        unsafe { cudarc::driver::result::memcpy_htod_sync(dst.ptr as usize as u64, src) }
            .map_err(|e| format!("cuMemcpyHtoD: {e:?}"))
    }

    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), String> {
        // SAFETY: src is a device allocation of at least dst.len() bytes.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(dst, src.ptr as usize as u64) }
            .map_err(|e| format!("cuMemcpyDtoH: {e:?}"))
    }

    fn sync(&mut self) -> Result<(), String> {
        cudarc::driver::result::ctx::synchronize().map_err(|e| format!("cuCtxSynchronize: {e:?}"))
    }

    fn host_view(&self, _: Buffer) -> Option<&[u8]> {
        None
    }
}

type HipStatus = i32;

/// Device memory through the HIP runtime, loaded at run time (no ROCm is
/// needed to build hpcagent).
pub struct Hip {
    lib: libloading::Library,
}

impl Hip {
    fn open() -> Result<Hip, String> {
        // SAFETY: loading a library runs its initializers; libamdhip64 is the
        // vendor runtime the submission links against anyway.
        let lib = unsafe { libloading::Library::new("libamdhip64.so") }.map_err(|_| {
            "the HIP runtime (libamdhip64.so) is not installed on this node".to_string()
        })?;
        let hip = Hip { lib };
        hip.call::<unsafe extern "C" fn(i32) -> HipStatus>("hipSetDevice", |f| unsafe { f(0) })?;
        Ok(hip)
    }

    fn call<F: Copy>(&self, name: &str, invoke: impl FnOnce(F) -> HipStatus) -> Result<(), String> {
        // SAFETY: the symbol is looked up with the signature HIP documents for it.
        let f =
            unsafe { self.lib.get::<F>(name.as_bytes()) }.map_err(|e| format!("{name}: {e}"))?;
        match invoke(*f) {
            0 => Ok(()),
            code => Err(format!("{name} failed with hipError {code}")),
        }
    }
}

const HIP_HOST_TO_DEVICE: i32 = 1;
const HIP_DEVICE_TO_HOST: i32 = 2;

type HipMemcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, i32) -> HipStatus;

impl Memory for Hip {
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        if bytes > 0 {
            self.call::<unsafe extern "C" fn(*mut *mut c_void, usize) -> HipStatus>(
                "hipMalloc",
                |f| unsafe { f(&mut ptr, bytes) },
            )?;
        }
        Ok(Buffer { ptr, bytes })
    }

    fn upload(&mut self, dst: Buffer, src: &[u8]) -> Result<(), String> {
        self.call::<HipMemcpy>("hipMemcpy", |f| unsafe {
            f(
                dst.ptr,
                src.as_ptr() as *const c_void,
                src.len(),
                HIP_HOST_TO_DEVICE,
            )
        })
    }

    fn download(&mut self, src: Buffer, dst: &mut [u8]) -> Result<(), String> {
        self.call::<HipMemcpy>("hipMemcpy", |f| unsafe {
            f(
                dst.as_mut_ptr() as *mut c_void,
                src.ptr,
                dst.len(),
                HIP_DEVICE_TO_HOST,
            )
        })
    }

    fn sync(&mut self) -> Result<(), String> {
        self.call::<unsafe extern "C" fn() -> HipStatus>("hipDeviceSynchronize", |f| unsafe { f() })
    }

    fn host_view(&self, _: Buffer) -> Option<&[u8]> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping that holds `ptr`, from /proc/self/smaps.
    fn vm_flags(ptr: *mut c_void) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let address = ptr as usize;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            if let Some((start, end)) = range
                && let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                )
            {
                inside = (start..end).contains(&address);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_string();
            }
        }
        panic!("no mapping holds {ptr:?}");
    }

    #[test]
    fn only_large_host_buffers_ask_for_huge_pages() {
        let small = Host.alloc(100_000).unwrap();
        assert!(
            !vm_flags(small.ptr).split(' ').any(|f| f == "hg"),
            "a 100 KB buffer asked for huge pages: {}",
            vm_flags(small.ptr)
        );
        let large = Host.alloc(HUGE_PAGES_FROM).unwrap();
        assert_eq!(large.ptr as usize % HUGE_PAGE, 0, "not 2 MiB-aligned");
        assert!(
            vm_flags(large.ptr).split(' ').any(|f| f == "hg"),
            "a 4 MiB buffer did not ask for huge pages: {}",
            vm_flags(large.ptr)
        );
    }
}
