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

/// The regions of the arrays of `arrays` a kernel only reads, (the array's
/// index, its bytes in the buffers), where `offsets` and `sizes` lay them
/// out: what each runner maps read-only ([`Mapping::protect`]).
pub fn read_only_regions<'a>(
    arrays: &'a [crate::protocol::ArraySpec],
    offsets: &'a [usize],
    sizes: &'a [usize],
) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + 'a {
    arrays
        .iter()
        .enumerate()
        .filter(|(_, spec)| spec.role == hpcagent_corpus::Role::In)
        .map(|(index, _)| (index, offsets[index]..offsets[index] + sizes[index]))
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
    #[error("a read-only descriptor of the shared buffers: {0}")]
    ReadOnly(std::io::Error),
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

    /// A descriptor of the memory file `fd` open for reading alone, for
    /// [`Mapping::protect`].
    pub fn read_only(fd: i32) -> Result<OwnedFd, BufferError> {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
        // SAFETY: opens a path of our own descriptor table.
        let opened = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if opened < 0 {
            return Err(BufferError::ReadOnly(std::io::Error::last_os_error()));
        }
        // SAFETY: a descriptor just returned to us.
        Ok(unsafe { OwnedFd::from_raw_fd(opened) })
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

    /// Maps `regions` (offset, bytes) of this mapping again, read-only,
    /// from `read_only`: a descriptor of the same memory file opened for
    /// reading alone. A mapping of a file not open for writing cannot be
    /// made writable (`mprotect` refuses), written through
    /// `/proc/self/mem`, or punched (`MADV_REMOVE`): the process that
    /// holds it, once it has closed its writable descriptor, cannot change
    /// those bytes at all, and a write to them faults at its address.
    pub fn protect(&self, read_only: i32, regions: &[(usize, usize)]) -> Result<(), BufferError> {
        for &(offset, bytes) in regions.iter().filter(|r| r.1 > 0) {
            let len = bytes.div_ceil(PAGE) * PAGE;
            assert!(
                offset % PAGE == 0 && offset + len <= self.len,
                "a region of the buffers"
            );
            let at = self.at(offset);
            // SAFETY: replaces pages of our own mapping, in bounds, with
            // the same file's pages read-only.
            let mapped = unsafe {
                libc::mmap(
                    at,
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    read_only,
                    offset as libc::off_t,
                )
            };
            if mapped != at {
                return Err(BufferError::Map {
                    bytes: len,
                    at: format!(" at {:#x} (read-only)", at as u64),
                    error: std::io::Error::last_os_error(),
                });
            }
            // SAFETY: the range just mapped; advice only.
            unsafe { libc::madvise(at, len, libc::MADV_HUGEPAGE) };
        }
        Ok(())
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

    /// What a process could do to its own mapping to write a region: make
    /// it writable again, write it through `/proc/self/mem`, or punch it
    /// out of the file; true where any of them changed a byte the other
    /// mapping reads.
    fn written_anyway(theirs: &Mapping, ours: &Mapping) -> bool {
        let at = theirs.at(0);
        // SAFETY: our own mapping's first page, restored below.
        let unprotected = unsafe { libc::mprotect(at, PAGE, libc::PROT_READ | libc::PROT_WRITE) };
        if unprotected == 0 {
            // SAFETY: the page was just made writable.
            unsafe { *(at as *mut u8) = 7 };
        }
        let mem = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/self/mem");
        if let Ok(mem) = mem {
            let _ = std::os::unix::fs::FileExt::write_at(&mem, &[8], at as u64 + 1);
        }
        // SAFETY: advice on our own mapping's second page.
        unsafe { libc::madvise(theirs.at(PAGE), PAGE, libc::MADV_REMOVE) };
        ours.bytes(0, 2) != [1, 2] || ours.bytes(PAGE, 1) != [3]
    }

    #[test]
    fn a_region_mapped_read_only_cannot_be_written_by_the_process_that_maps_it() {
        let layout = Layout::new(&[2 * PAGE]);
        let fd_and_ours = || {
            let (fd, mut ours) = Mapping::create(&layout).unwrap();
            ours.bytes_mut(0, 2).copy_from_slice(&[1, 2]);
            ours.bytes_mut(PAGE, 1).copy_from_slice(&[3]);
            (fd, ours)
        };
        // Protected as a page alone would be, from the writable file: undone.
        let (fd, ours) = fd_and_ours();
        let theirs = Mapping::map(fd.as_raw_fd(), &layout, None).unwrap();
        // SAFETY: our own mapping.
        let protected = unsafe { libc::mprotect(theirs.at(0), 2 * PAGE, libc::PROT_READ) };
        assert_eq!(protected, 0);
        assert!(written_anyway(&theirs, &ours), "the control wrote nothing");
        // Mapped from a descriptor open for reading: nothing gets through.
        let (fd, ours) = fd_and_ours();
        let theirs = Mapping::map(fd.as_raw_fd(), &layout, None).unwrap();
        let read_only = Mapping::read_only(fd.as_raw_fd()).unwrap();
        theirs
            .protect(read_only.as_raw_fd(), &[(0, 2 * PAGE)])
            .unwrap();
        assert!(!written_anyway(&theirs, &ours));
        assert_eq!(theirs.bytes(0, 2), [1, 2], "it still reads the region");
        // A plain write faults, at the address written.
        // SAFETY: the child writes one byte of a read-only page and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above; the write faults before the exit.
            unsafe {
                std::ptr::write_volatile(theirs.at(PAGE) as *mut u8, 9);
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV);
        assert_eq!(ours.bytes(PAGE, 1), [3]);
    }
}
