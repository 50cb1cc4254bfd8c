//! The memory the kernels of a run read and write: one sealed memory file,
//! shared by the supervisor and both runners, every array of the run and
//! the workspace at a fixed offset.
//!
//! The supervisor writes a call's inputs into its own mapping while every
//! runner is stopped, lets one runner make the call, and reads the outputs
//! back once that runner is stopped again: nothing a submission does to its
//! own mapping (unmapping or protecting it, a fault handler) changes what
//! the supervisor reads, no code of the submission runs while it reads, and
//! the file's size is sealed, so the submission cannot shrink it under the
//! supervisor. The baseline and the submission never run at once, and each
//! call's inputs, canaries and workspace are written anew before it, so
//! they can share the memory; sharing it, they also share where it lies:
//! the same physical pages, mapped at the same address in both runners, so
//! the same code uses the caches alike in either. (Each with memory of its
//! own, placed wherever the kernel found pages, the same code measured
//! 0.85x to 1.08x itself from grade to grade on small kernels, each grade
//! with a tight interval.)
//!
//! Arrays of 4 MiB or more start on a 2 MiB boundary, and the region asks for
//! transparent huge pages, which shared memory gets where the node allows
//! them (`shmem_enabled`).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const HUGE_PAGE: usize = 2 << 20;
/// NumPy asks for huge pages from this size on (`indicate_hugepages`).
const HUGE_PAGES_FROM: usize = 4 << 20;
const PAGE: usize = 4096;

/// Where both runners map the buffers: far above anything a process maps
/// on its own, so that it is free in both.
pub const ADDRESS: u64 = 0x2000_0000_0000;

/// Where each region lies: the arrays in argument order, then the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
    pub total: usize,
}

impl Layout {
    /// Regions of `sizes` bytes, each aligned as its size asks.
    pub fn new(sizes: &[usize]) -> Layout {
        let mut offsets = Vec::with_capacity(sizes.len());
        let mut end: usize = 0;
        for &size in sizes {
            let align = if size >= HUGE_PAGES_FROM {
                HUGE_PAGE
            } else {
                PAGE
            };
            let start = end.div_ceil(align) * align;
            offsets.push(start);
            end = start + size.div_ceil(PAGE) * PAGE;
        }
        Layout {
            offsets,
            sizes: sizes.to_vec(),
            total: end.max(PAGE),
        }
    }
}

/// A mapping of the shared buffers.
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value.
unsafe impl Send for Mapping {}

/// Why the shared buffers could not be made or mapped.
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    #[error("memfd_create: {0}")]
    Create(std::io::Error),
    #[error("shared buffers: {0}")]
    Seal(std::io::Error),
    #[error("cannot allocate {bytes} bytes of buffers for the run's arrays: {error}")]
    Allocate { bytes: usize, error: std::io::Error },
    /// `at` is " at 0x…" where a fixed address was asked for, else "".
    #[error("cannot map {bytes} bytes of buffers{at}: {error}")]
    Map {
        bytes: usize,
        at: String,
        error: std::io::Error,
    },
}

impl Mapping {
    /// A new sealed memory file of `layout.total` bytes, and this process's
    /// mapping of it.
    pub fn create(layout: &Layout) -> Result<(OwnedFd, Mapping), BufferError> {
        // SAFETY: memfd_create with a static name and flags.
        let fd = unsafe {
            libc::memfd_create(
                c"hpcagent-buffers".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(BufferError::Create(std::io::Error::last_os_error()));
        }
        // SAFETY: a descriptor just returned to us.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Allocated at once: faulted in page by page as the arrays are
        // first written, a memory file of 1.5 GB took 5 s on this project's
        // machines, allocated here 0.5 s. A node without the memory says so
        // here rather than killing the run on its first touch.
        if layout.total > 0 {
            // SAFETY: fallocate on our descriptor.
            let allocated =
                unsafe { libc::fallocate(fd.as_raw_fd(), 0, 0, layout.total as libc::off_t) };
            if allocated != 0 {
                return Err(BufferError::Allocate {
                    bytes: layout.total,
                    error: std::io::Error::last_os_error(),
                });
            }
        }
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: ftruncate and fcntl on our descriptor.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), layout.total as libc::off_t) != 0
                || libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0
            {
                return Err(BufferError::Seal(std::io::Error::last_os_error()));
            }
        }
        let mapping = Mapping::map(fd.as_raw_fd(), layout, None)?;
        Ok((fd, mapping))
    }

    /// Maps the shared buffers from `fd`, at `address` when given (and only
    /// there).
    pub fn map(fd: i32, layout: &Layout, address: Option<u64>) -> Result<Mapping, BufferError> {
        let (hint, fixed) = match address {
            Some(a) => (a as *mut c_void, libc::MAP_FIXED_NOREPLACE),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: a shared mapping of a file we hold; checked below.
        let base = unsafe {
            libc::mmap(
                hint,
                layout.total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | fixed,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED || (address.is_some() && base != hint) {
            return Err(BufferError::Map {
                bytes: layout.total,
                at: address.map(|a| format!(" at {a:#x}")).unwrap_or_default(),
                error: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: the mapping's range; advice only.
        unsafe { libc::madvise(base, layout.total, libc::MADV_HUGEPAGE) };
        Ok(Mapping {
            base: base as *mut u8,
            len: layout.total,
        })
    }

    /// The address of byte `offset`.
    pub fn at(&self, offset: usize) -> *mut c_void {
        debug_assert!(offset <= self.len);
        // SAFETY: within the mapping (or one past it for an empty region).
        unsafe { self.base.add(offset) as *mut c_void }
    }

    /// `len` bytes from `offset`.
    pub fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.len, "region outside the buffers");
        // SAFETY: in bounds; the runners are stopped while the supervisor
        // reads, and write only plain bytes in any case.
        unsafe { std::slice::from_raw_parts(self.base.add(offset), len) }
    }

    /// `len` writable bytes from `offset`.
    pub fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len, "region outside the buffers");
        // SAFETY: in bounds; see `bytes`.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(offset), len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_do_not_overlap_and_large_ones_start_on_huge_pages() {
        let layout = Layout::new(&[100, HUGE_PAGES_FROM, 0, 5000, HUGE_PAGES_FROM + 1]);
        let ends: Vec<(usize, usize)> = layout
            .offsets
            .iter()
            .zip(&layout.sizes)
            .map(|(&o, &s)| (o, o + s))
            .collect();
        for w in ends.windows(2) {
            assert!(w[0].1 <= w[1].0, "{ends:?}");
        }
        assert_eq!(layout.offsets[1] % HUGE_PAGE, 0);
        assert_eq!(layout.offsets[4] % HUGE_PAGE, 0);
        assert_eq!(layout.offsets[3] % PAGE, 0);
        assert!(layout.total >= ends[4].1);
    }

    #[test]
    fn what_one_mapping_writes_the_other_reads_and_the_size_is_sealed() {
        let layout = Layout::new(&[8192]);
        let (fd, mut ours) = Mapping::create(&layout).unwrap();
        let theirs = Mapping::map(fd.as_raw_fd(), &layout, Some(ADDRESS)).unwrap();
        assert_eq!(theirs.at(0) as u64, ADDRESS);
        ours.bytes_mut(0, 4).copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(theirs.bytes(0, 4), &[1, 2, 3, 4]);
        // SAFETY: ftruncate on our descriptor; it must be refused.
        assert_ne!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) }, 0);
        // The address is taken now: a second mapping there is refused.
        assert!(Mapping::map(fd.as_raw_fd(), &layout, Some(ADDRESS)).is_err());
    }
}
