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
//! The memory lies on 2 MiB pages where the node lets a process mount a
//! tmpfs of its own (root, or in the user namespace a run's supervisor
//! takes): a tmpfs mounted `huge=within_size`, never attached to any
//! path, holds the file. NumPy's arrays of 4 MiB or more lie on huge pages
//! (it asks for them), so the reference, HPCAgent-Bench's judge and a
//! user's program read them so; on the small pages of a memory file the
//! same C walking a 160 MB matrix by columns took 3.5 times as long
//! (bicg at S: 0.07x NumPy here, 0.14x in HPCAgent-Bench's judge). Shared
//! memory gets huge pages on its own only where the node says so
//! (`shmem_enabled`, `never` by default). Elsewhere the file is a sealed
//! memory file ([`Backing::MemoryFile`]). Arrays of 4 MiB or more start on a
//! 2 MiB boundary either way.

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

/// What the buffers' file lies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// A tmpfs of the supervisor's own, mounted for huge pages: `huge`
    /// bytes of the file lie on them, of the `whole` that can (its whole
    /// 2 MiB; the kernel places small pages where it has no huge one
    /// free). `None` where the kernel could not say (before 5.14).
    HugePages { huge: Option<usize>, whole: usize },
    /// A sealed memory file, on the pages shared memory gets on this node
    /// (`shmem_enabled`); `why` no tmpfs could be mounted.
    MemoryFile { why: String },
}

impl Backing {
    /// In a verdict's words: the kind of file, then `: ` and this run's
    /// account of it (runs compare by the kind).
    pub fn describe(&self) -> String {
        match self {
            Backing::HugePages { whole: 0, .. } => {
                "a tmpfs of huge pages: the buffers are under 2 MiB, on 4 KiB pages".into()
            }
            Backing::HugePages { huge, whole } => format!(
                "a tmpfs of huge pages: {} of {} MiB on 2 MiB pages",
                huge.map_or("?".into(), |h| (h >> 20).to_string()),
                whole >> 20
            ),
            Backing::MemoryFile { why } => format!(
                "a memory file, shmem_enabled {}: no tmpfs of its own ({why})",
                shmem_enabled()
            ),
        }
    }
}

/// The node's word on huge pages for shared memory: the bracketed choice
/// of its setting.
fn shmem_enabled() -> String {
    let setting = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
        .unwrap_or_default();
    setting
        .split_whitespace()
        .find_map(|word| word.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or("unknown")
        .to_string()
}

/// The bytes of this process's mapping that starts at `address` the
/// kernel maps 2 MiB at a time (shared memory's `ShmemPmdMapped` in
/// `smaps`); `None` where `smaps` cannot be read or has no such mapping.
fn pmd_mapped(address: *mut c_void) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let start = format!("{:x}-", address as usize);
    let header = |line: &str| {
        let range = line.split_whitespace().next().unwrap_or("");
        range.split_once('-').is_some_and(|(a, b)| {
            usize::from_str_radix(a, 16).is_ok() && usize::from_str_radix(b, 16).is_ok()
        })
    };
    let mut lines = smaps.lines().skip_while(|line| !line.starts_with(&start));
    lines.next()?;
    let kb: usize = lines
        .take_while(|line| !header(line))
        .filter_map(|line| line.strip_prefix("ShmemPmdMapped:"))
        .filter_map(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .sum();
    Some(kb * 1024)
}

/// A file of no name on a tmpfs of this process's own that places huge
/// pages (`huge=within_size`), bounded to `bytes` and a huge page more,
/// and mounted nowhere: nothing can open it again by a path, and the
/// runners close their descriptors of it before a submission's code
/// loads, which is what the memory file's seals guard against there (a
/// tmpfs file takes no seals). The mount wants `CAP_SYS_ADMIN` over this
/// process's mount namespace: a supervisor in a user namespace of its own
/// takes a mount namespace of its own too (its runners start in copies of
/// it either way).
fn huge_page_file(bytes: usize) -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
    let open = || rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC);
    let fs = match open() {
        Err(rustix::io::Errno::PERM) => {
            // SAFETY: unshare with a flag; it moves this thread alone.
            if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            open()?
        }
        opened => opened?,
    };
    let limit = (bytes.div_ceil(HUGE_PAGE) + 1) * HUGE_PAGE;
    rustix::mount::fsconfig_set_string(&fs, "huge", "within_size")?;
    rustix::mount::fsconfig_set_string(&fs, "size", limit.to_string())?;
    rustix::mount::fsconfig_create(&fs)?;
    let attributes = MountAttrFlags::MOUNT_ATTR_NOEXEC
        | MountAttrFlags::MOUNT_ATTR_NOSUID
        | MountAttrFlags::MOUNT_ATTR_NODEV;
    let mount = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attributes)?;
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        &mount,
        ".",
        flags,
        Mode::RUSR | Mode::WUSR,
    )?)
}

/// A new memory file that takes seals.
fn memory_file() -> Result<OwnedFd, BufferError> {
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
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
    /// A new memory file of `layout.total` bytes (on huge pages where it
    /// can be: [`Backing`]), and this process's mapping of it.
    pub fn create(layout: &Layout) -> Result<(OwnedFd, Mapping, Backing), BufferError> {
        match huge_page_file(layout.total) {
            Ok(fd) => {
                let mapping = Mapping::allocate(&fd, layout, false)?;
                let whole = layout.total / HUGE_PAGE * HUGE_PAGE;
                // Buffers under 2 MiB have no huge page to count.
                let huge = if whole == 0 {
                    Some(0)
                } else {
                    mapping.huge_mapped()
                };
                Ok((fd, mapping, Backing::HugePages { huge, whole }))
            }
            Err(e) => {
                let fd = memory_file()?;
                let mapping = Mapping::allocate(&fd, layout, true)?;
                Ok((fd, mapping, Backing::MemoryFile { why: e.to_string() }))
            }
        }
    }

    /// The bytes of this mapping the kernel maps 2 MiB at a time, once
    /// every page of it is mapped (`MADV_POPULATE_WRITE`, Linux 5.14: the
    /// supervisor writes every array before a call in any case), as this
    /// process's `smaps` counts them.
    fn huge_mapped(&self) -> Option<usize> {
        // SAFETY: the mapping's own range; it maps pages, as writing would.
        let populated = unsafe { libc::madvise(self.at(0), self.len, libc::MADV_POPULATE_WRITE) };
        if populated != 0 {
            return None;
        }
        pmd_mapped(self.at(0))
    }

    /// Sizes the file `fd` to `layout.total`, allocates it, seals its size
    /// where `sealed` (a memory file), and maps it.
    fn allocate(fd: &OwnedFd, layout: &Layout, sealed: bool) -> Result<Mapping, BufferError> {
        // Its size first: a tmpfs `huge=within_size` places a huge page
        // only where the file's size holds it whole.
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), layout.total as libc::off_t) } != 0 {
            return Err(BufferError::Seal(std::io::Error::last_os_error()));
        }
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
        // SAFETY: fcntl on our descriptor.
        if sealed && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(BufferError::Seal(std::io::Error::last_os_error()));
        }
        Mapping::map(fd.as_raw_fd(), layout, None)
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

    /// The kinds of file the buffers may lie in: a tmpfs file of huge
    /// pages (this test runs where a process may mount one), and a sealed
    /// memory file.
    const KINDS: [&str; 2] = ["tmpfs", "memory file"];

    /// A new file of `kind`, `layout` mapped from it.
    fn backed(kind: &str, layout: &Layout) -> (OwnedFd, Mapping) {
        let tmpfs = kind == "tmpfs";
        let fd = match tmpfs {
            true => huge_page_file(layout.total).expect("a tmpfs of huge pages"),
            false => memory_file().unwrap(),
        };
        let mapping = Mapping::allocate(&fd, layout, !tmpfs).unwrap();
        (fd, mapping)
    }

    #[test]
    fn what_one_mapping_writes_the_other_reads_and_a_memory_file_s_size_is_sealed() {
        let layout = Layout::new(&[8192]);
        for kind in KINDS {
            let (fd, mut ours) = backed(kind, &layout);
            let theirs = Mapping::map(fd.as_raw_fd(), &layout, Some(ADDRESS)).unwrap();
            assert_eq!(theirs.at(0) as u64, ADDRESS);
            ours.bytes_mut(0, 4).copy_from_slice(&[1, 2, 3, 4]);
            assert_eq!(theirs.bytes(0, 4), &[1, 2, 3, 4], "{kind}");
            // The address is taken now: a second mapping there is refused.
            assert!(Mapping::map(fd.as_raw_fd(), &layout, Some(ADDRESS)).is_err());
            // A tmpfs file takes no seals: its size is kept by no runner
            // holding a descriptor of it once a submission loads.
            // SAFETY: ftruncate on our descriptor, after the mappings' use.
            let shrunk = unsafe { libc::ftruncate(fd.as_raw_fd(), 0) } == 0;
            assert_eq!(shrunk, kind == "tmpfs", "{kind}");
        }
    }

    /// An array of 8 MiB, the runner's read-only mapping of it included,
    /// lies on huge pages where the supervisor may mount a tmpfs (as NumPy's
    /// arrays do): on small pages, a column walk of a 160 MB matrix took
    /// 3.5 times as long. A memory file here gets small pages
    /// (`shmem_enabled` is `never` on this project's machines).
    #[test]
    fn a_run_s_large_arrays_lie_on_huge_pages_where_a_tmpfs_can_be_mounted() {
        let (_, _, small) = Mapping::create(&Layout::new(&[100 << 10])).unwrap();
        assert_eq!(
            small.describe(),
            "a tmpfs of huge pages: the buffers are under 2 MiB, on 4 KiB pages"
        );
        let array = 8 << 20;
        let layout = Layout::new(&[100, array]);
        let (fd, mut ours, backing) = Mapping::create(&layout).unwrap();
        // The 100 bytes' first 2 MiB, then the array's 8.
        let whole = 10 << 20;
        let huge = Some(whole);
        assert_eq!(backing, Backing::HugePages { huge, whole });
        assert_eq!(
            backing.describe(),
            "a tmpfs of huge pages: 10 of 10 MiB on 2 MiB pages"
        );
        let offset = layout.offsets[1];
        ours.bytes_mut(offset, array).fill(1);
        let theirs = Mapping::map(fd.as_raw_fd(), &layout, None).unwrap();
        let read_only = Mapping::read_only(fd.as_raw_fd()).unwrap();
        theirs
            .protect(read_only.as_raw_fd(), &[(offset, array)])
            .unwrap();
        let region = theirs.bytes(offset, array);
        assert_eq!(region.iter().map(|&b| b as usize).sum::<usize>(), array);
        let runner = pmd_mapped(theirs.at(offset)).unwrap();
        assert!(runner >= array, "{runner}");
        let memory = memory_file().unwrap();
        let mut small = Mapping::allocate(&memory, &layout, true).unwrap();
        small.bytes_mut(offset, array).fill(1);
        if shmem_enabled() == "never" {
            assert_eq!(pmd_mapped(small.at(0)), Some(0));
        }
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
        for kind in KINDS {
            let fd_and_ours = || {
                let (fd, mut ours) = backed(kind, &layout);
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
}
