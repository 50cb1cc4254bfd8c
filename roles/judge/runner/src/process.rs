//! `hpcagent judge exec --runner`: the process a submission (or the
//! baseline) runs in. It loads the library and calls its symbol when the
//! supervisor says so; it measures nothing and decides nothing.
//!
//! Order matters: it maps the run's shared buffers where the supervisor
//! says, drops to the run's user (root judges), closes every descriptor but
//! its stdio and its two channels, confines itself (Landlock, then
//! seccomp), and only then loads the library, whose initializers already
//! run confined. Then it reports
//! `Ready` and waits: each call is a `u32` on its call channel (which
//! argument list), and a byte on its report channel once the call has
//! returned. Its stdin is `/dev/null`, as a program's would be. The
//! supervisor stops the whole process before it writes a call's inputs and
//! again before it reads the outputs; the time between is the call's.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::FromRawFd;

use libffi::middle::{Arg, Cif, CodePtr, Type};

use hpcagent_sandbox::landlock::{Confinement, Enforcement, become_user};
use hpcagent_sandbox::seccomp::{Filters, Profile};

use super::buffers::{Layout, Mapping, read_only_regions};
use super::device::{self, Device};
use super::papi::Papi;
use super::protocol::{Report, RunArg, RunnerSetup, write_frame};

/// The runner's report channel.
pub const REPORT_FD: i32 = 3;
/// Its setup, then its calls, from the supervisor.
pub const CALLS_FD: i32 = 4;
/// The shared buffers' memory file, closed once mapped.
pub const BUFFERS_FD: i32 = 5;
/// The same file open for reading alone: the inputs' regions are mapped
/// from it, so that no code of the runner's can write them ([`Mapping::protect`]).
pub const BUFFERS_READ_ONLY_FD: i32 = 6;

/// A call has returned.
pub const DONE: u8 = b'D';
/// A call failed in the runner's own code (a device error); a frame follows.
pub const FAILED: u8 = b'F';
/// The call index of a call that calls nothing: the runner reports it
/// returned at once. Its time from outside is the runner's round trip
/// alone (the index written, the runner continued and woken, its byte
/// read, every thread stopped), which every call's time includes.
pub const FLOOR: u32 = u32::MAX;
/// A batch: a call index with this bit set (and not [`FLOOR`]) says that
/// as many indices as its other bits count follow, in the same write; the
/// runner makes those calls in order and reports once, when the last has
/// returned.
pub const BATCH: u32 = 1 << 31;
/// The most calls a batch holds: its words fit in one write of a pipe's
/// atomic size (`PIPE_BUF`), which a stopped runner's channel takes whole
/// or not at all.
pub const MAX_BATCH: u32 = 4096 / 4 - 1;

/// Where the runner failed, and why in words: the report's `Failed` frame.
type Failure = (&'static str, String);

/// The failure at `stage` of an error, in its own words.
fn at<E: std::fmt::Display>(stage: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| (stage, e.to_string())
}

/// Runs the runner; returns its exit code.
pub fn main() -> i32 {
    // SAFETY: the supervisor put the report channel here for this process.
    let mut report = unsafe { File::from_raw_fd(REPORT_FD) };
    // SAFETY: as the report channel.
    let mut calls = BufReader::new(unsafe { File::from_raw_fd(CALLS_FD) });
    match run(&mut calls, &mut report) {
        Ok(()) => 0,
        Err((stage, message)) => {
            let _ = write_frame(
                &mut report,
                &Report::Failed {
                    stage: stage.into(),
                    message,
                },
                &[],
            );
            3
        }
    }
}

fn run(calls_in: &mut impl BufRead, report: &mut File) -> Result<(), Failure> {
    let mut line = String::new();
    calls_in
        .read_line(&mut line)
        .map_err(|e| ("setup", format!("cannot read the setup: {e}")))?;
    let setup: RunnerSetup =
        serde_json::from_str(&line).map_err(|e| ("setup", format!("bad setup: {e}")))?;
    let layout = Layout {
        offsets: setup.offsets.clone(),
        sizes: setup.sizes.clone(),
        total: setup.buffer_bytes,
    };
    let buffers =
        Mapping::map(BUFFERS_FD, &layout, Some(super::buffers::ADDRESS)).map_err(at("buffers"))?;
    buffers
        .protect(BUFFERS_READ_ONLY_FD, &input_regions(&setup))
        .map_err(at("buffers"))?;
    if let Some(id) = setup.run_as {
        become_user(id).map_err(at("privileges"))?;
        // Changing user clears the parent-death signal: ask for it again.
        hpcagent_sandbox::reap::die_with_parent(libc::SIGKILL);
    }
    // Only stdio and its two channels stay: nothing the judge or the
    // supervisor held reaches the submission.
    // SAFETY: close_range on this process's own descriptors.
    unsafe { libc::syscall(libc::SYS_close_range, CALLS_FD as u32 + 1, u32::MAX, 0) };
    let landlock = confine(&setup)?;
    let counters = !setup.papi_events.is_empty();
    let sockets = setup.profile_output.is_some();
    let filters = Filters::new(Profile::Run { counters, sockets }).map_err(at("seccomp"))?;
    filters
        .install()
        .map_err(|e| ("seccomp", format!("cannot install the filter: {e}")))?;
    let device = device::for_language(setup.language).map_err(at("device"))?;
    let papi = match counters {
        true => Some(Papi::open(&setup.papi_events).map_err(at("papi"))?),
        false => None,
    };
    // From here on the library's own code may run and write to the
    // channel: the supervisor charges what it reads to the submission.
    send(
        report,
        &Report::Confined {
            landlock,
            seccomp: true,
        },
    );
    default_fault_actions();
    let (library, code) = load(&setup)?;
    let mut calls = Calls::new(&setup, &buffers, device)?;
    send(report, &Report::Ready);
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    let mut made = 0u32;
    let mut batch = Vec::new();
    while let Some(indices) = next_calls(calls_in, &mut batch) {
        if indices.is_empty() {
            let _ = report.write_all(&[DONE]);
            continue;
        }
        if let Some(p) = &papi {
            p.start().map_err(at("papi"))?;
        }
        let called = indices
            .iter()
            .try_for_each(|&index| calls.call(code, index as usize, &buffers));
        if let Some(p) = &papi {
            for (name, value) in p.stop().map_err(at("papi"))? {
                *totals.entry(name).or_default() += value;
            }
        }
        match called {
            Ok(()) => {
                let _ = report.write_all(&[DONE]);
            }
            Err((stage, message)) => {
                let _ = report.write_all(&[FAILED]);
                return Err((stage, message));
            }
        }
        made += indices.len() as u32;
    }
    if counters && made > 0 {
        totals.values_mut().for_each(|v| *v /= made as f64);
        send(report, &Report::Counters { values: totals });
    }
    if !calls.device_ns.is_empty() {
        let ns = std::mem::take(&mut calls.device_ns);
        send(report, &Report::DeviceTimes { ns });
    }
    // Keep the library mapped until every call is done.
    drop(library);
    Ok(())
}

/// The calls the supervisor asks for next, read into `batch`: one call,
/// none (an empty call, [`FLOOR`], answered at once), or a [`BATCH`];
/// `None` at the end of the calls.
fn next_calls<'b>(calls_in: &mut impl BufRead, batch: &'b mut Vec<u32>) -> Option<&'b [u32]> {
    let mut word = || {
        let mut bytes = [0u8; 4];
        calls_in
            .read_exact(&mut bytes)
            .ok()
            .map(|()| u32::from_le_bytes(bytes))
    };
    let index = word()?;
    batch.clear();
    match index {
        FLOOR => {}
        _ if index & BATCH != 0 => {
            for _ in 0..index & !BATCH {
                batch.push(word()?);
            }
        }
        _ => batch.push(index),
    }
    Some(batch)
}

fn send(report: &mut File, message: &Report) {
    // If the supervisor is gone there is nobody to tell.
    let _ = write_frame(report, message, &[]);
}

/// Landlock: read the system, the shared mount and its directory; write
/// only its directory; no TCP; no signals or abstract sockets outside. A
/// profiled run writes its profiler's directory too, and its TCP is the
/// loopback of the network it shares with its profiler.
fn confine(setup: &RunnerSetup) -> Result<Enforcement, Failure> {
    let mut read = setup.readable.clone();
    read.push(setup.sandbox.clone());
    let mut write = vec![setup.sandbox.clone()];
    write.extend(setup.profile_output.clone());
    let confinement = Confinement {
        read,
        write,
        system: true,
        connect: Vec::new(),
        gpus: setup.language.is_gpu(),
        any_tcp: setup.profile_output.is_some(),
    };
    confinement.apply().map_err(at("confine"))
}

/// Loads the library with every symbol bound now (not at first use): one
/// that references a function nothing defines is refused here, as a build
/// error, instead of the dynamic linker ending the process mid-call.
fn load(setup: &RunnerSetup) -> Result<(libloading::Library, CodePtr), Failure> {
    let now = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
    // SAFETY: loading runs the library's initializers: that is the
    // untrusted code this process exists to contain.
    let library: libloading::Library =
        unsafe { libloading::os::unix::Library::open(Some(&setup.library), now) }
            .map_err(|e| {
                // dlerror()'s text (which symbol, which file) is the source.
                let why = std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
                ("load", why)
            })?
            .into();
    // SAFETY: only the address is taken; the call goes through libffi with
    // the signature the ABI defines.
    let symbol =
        unsafe { library.get::<*const c_void>(setup.symbol.as_bytes()) }.map_err(|_| {
            (
                "symbol",
                format!("the library does not export {}", setup.symbol),
            )
        })?;
    let code = CodePtr(*symbol as *mut c_void);
    Ok((library, code))
}

/// One argument's value as libffi passes it; the storage must not move
/// between building the argument list and the call.
enum Value {
    Ptr(*mut c_void),
    I64(i64),
    F64(f64),
    F32(f32),
    U8(u8),
}

/// A device array: where it lies in the host buffers and on the device.
struct Staged {
    offset: usize,
    device: device::Buffer,
}

/// The prepared calls: one argument list per entry of the setup's.
struct Calls {
    lists: Vec<(Cif, Vec<Value>)>,
    /// Per call: the arrays and their byte sizes, and whether each is an output.
    arrays: Vec<Vec<(usize, usize, bool)>>,
    device: Option<(Box<dyn Device>, Vec<Staged>)>,
    /// On a device, each call's own time there, in the order made.
    device_ns: Vec<u64>,
}

impl Calls {
    fn new(
        setup: &RunnerSetup,
        buffers: &Mapping,
        device: Option<Box<dyn Device>>,
    ) -> Result<Calls, Failure> {
        let workspace_at = *setup.offsets.last().unwrap_or(&0);
        // On a device, every region gets a device buffer as large as the
        // largest use of it; kernels see device pointers.
        let device = match device {
            None => None,
            Some(mut d) => {
                let mut staged = Vec::new();
                for (region, &offset) in setup.offsets.iter().enumerate() {
                    let bytes = region_bytes(setup, region);
                    let buffer = d.alloc(bytes).map_err(at("alloc"))?;
                    staged.push(Staged {
                        offset,
                        device: buffer,
                    });
                }
                Some((d, staged))
            }
        };
        let pointer = |region: usize, offset: usize| match &device {
            Some((_, staged)) => staged[region].device.ptr,
            None => buffers.at(offset),
        };
        let mut lists = Vec::new();
        let mut arrays = Vec::new();
        for args in &setup.calls {
            let mut values = Vec::new();
            let mut types = Vec::new();
            let mut used = Vec::new();
            for arg in args {
                match arg {
                    RunArg::Array { index, shape } => {
                        let spec = &setup.arrays[*index];
                        let bytes = RunArg::elements(shape) * spec.dtype.size();
                        used.push((*index, bytes, spec.role.is_output()));
                        values.push(Value::Ptr(pointer(*index, setup.offsets[*index])));
                        types.push(Type::pointer());
                    }
                    RunArg::Int(v) => {
                        values.push(Value::I64(*v));
                        types.push(Type::i64());
                    }
                    RunArg::F64(v) => {
                        values.push(Value::F64(*v));
                        types.push(Type::f64());
                    }
                    RunArg::F32(v) => {
                        values.push(Value::F32(*v));
                        types.push(Type::f32());
                    }
                    RunArg::Bool(v) => {
                        values.push(Value::U8(u8::from(*v)));
                        types.push(Type::u8());
                    }
                    RunArg::Workspace(bytes) => {
                        let region = setup.offsets.len() - 1;
                        used.push((region, *bytes as usize, false));
                        let ptr = match bytes {
                            0 => std::ptr::null_mut(),
                            _ => pointer(region, workspace_at),
                        };
                        values.push(Value::Ptr(ptr));
                        types.push(Type::pointer());
                    }
                }
            }
            lists.push((Cif::new(types, Type::void()), values));
            arrays.push(used);
        }
        Ok(Calls {
            lists,
            arrays,
            device,
            device_ns: Vec::new(),
        })
    }

    /// Makes call `index`: on a device, its arrays go up before and its
    /// outputs come back after (all of it inside the timed window: the
    /// supervisor cannot tell the copies from the kernel).
    fn call(&mut self, code: CodePtr, index: usize, buffers: &Mapping) -> Result<(), Failure> {
        let Some((cif, values)) = self.lists.get(index) else {
            return Err(("call", format!("no argument list {index}")));
        };
        if let Some((device, staged)) = &mut self.device {
            for &(region, bytes, _) in &self.arrays[index] {
                let s = &staged[region];
                device
                    .upload(s.device, buffers.bytes(s.offset, bytes))
                    .map_err(at("copy"))?;
            }
            device.sync().map_err(at("sync"))?;
            device.mark(false).map_err(at("sync"))?;
        }
        let args: Vec<Arg> = values
            .iter()
            .map(|v| match v {
                Value::Ptr(p) => Arg::new(p),
                Value::I64(i) => Arg::new(i),
                Value::F64(f) => Arg::new(f),
                Value::F32(f) => Arg::new(f),
                Value::U8(b) => Arg::new(b),
            })
            .collect();
        // SAFETY: the argument types follow the ABI of the symbol; the
        // buffers are as large as the call's shapes say.
        unsafe { cif.call::<()>(code, &args) };
        if let Some((device, staged)) = &mut self.device {
            device.mark(true).map_err(at("sync"))?;
            device.sync().map_err(at("sync"))?;
            self.device_ns.push(device.marked_ns().map_err(at("sync"))?);
            for &(region, bytes, output) in &self.arrays[index] {
                if output {
                    let s = &staged[region];
                    let host = buffers.at(s.offset) as *mut u8;
                    // SAFETY: the region holds at least `bytes`; this
                    // process is the only writer while it runs.
                    let dst = unsafe { std::slice::from_raw_parts_mut(host, bytes) };
                    device.download(s.device, dst).map_err(at("copy"))?;
                }
            }
        }
        Ok(())
    }
}

/// The regions the runner maps read-only, (offset, bytes): a write to one
/// faults, and the supervisor needs no check that a call left them as
/// written.
fn input_regions(setup: &RunnerSetup) -> Vec<(usize, usize)> {
    read_only_regions(&setup.arrays, &setup.offsets, &setup.sizes)
        .map(|(_, region)| (region.start, region.len()))
        .collect()
}

/// The largest use of region `region` (an array, or the workspace last).
fn region_bytes(setup: &RunnerSetup, region: usize) -> usize {
    setup
        .calls
        .iter()
        .flatten()
        .filter_map(|arg| match arg {
            RunArg::Array { index, shape } if *index == region => {
                Some(RunArg::elements(shape) * setup.arrays[*index].dtype.size())
            }
            RunArg::Workspace(bytes) if region == setup.offsets.len() - 1 => Some(*bytes as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Rust's runtime handles SIGSEGV and SIGBUS to report its own stack
/// overflows, and aborts (SIGABRT) when a fault lands in the main thread's
/// guard page. A submission that overflows its stack then ended by SIGSEGV
/// or by SIGABRT depending on where its frames met the guard, so the same
/// source got two verdicts. From here on only the submission's code runs:
/// faults take their default action, and the supervisor sees the signal.
fn default_fault_actions() {
    for signal in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: restores a default disposition; no handler runs.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn calls_come_one_at_a_time_empty_or_in_a_batch() {
        let stream = words(&[3, FLOOR, BATCH | 3, 0, 1, 2, 1, BATCH | 2, 5]);
        let mut stream = stream.as_slice();
        let mut batch = Vec::new();
        let mut next = || next_calls(&mut stream, &mut batch).map(<[u32]>::to_vec);
        assert_eq!(next(), Some(vec![3]));
        assert_eq!(next(), Some(vec![]), "an empty call");
        assert_eq!(next(), Some(vec![0, 1, 2]));
        assert_eq!(next(), Some(vec![1]));
        assert_eq!(
            next(),
            None,
            "a batch whose indices stop short ends the calls"
        );
    }
}
