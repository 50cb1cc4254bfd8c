//! `hpcagent judge exec`: the runner process. It loads a submission's shared
//! object and calls its symbol, so that whatever the submission does (crash,
//! hang, allocate without end) happens in this process, never in the judge.
//!
//! Order matters: inputs are read first (they may be unreadable later), then
//! the process drops to the run's user (root judges), confines itself, and
//! only then loads the library, whose initializers already run confined.
//! Every call gets fresh copies of the inputs and outputs pre-filled with a
//! canary; only the call is timed. Every call but the last of a case may get
//! other input values (`earlier`), so that the verified call is one whose
//! answer no earlier call computed; its outputs are copied the moment it
//! returns, so work a kernel leaves running after it returns does not count
//! (and a copy the runner was preempted during is taken again, see
//! [`super::window`]). The calls between the first and the last three also
//! differ from each other ([`vary`]), so a kernel that caches answers keyed
//! by its inputs' values computes on every call it is timed for but two.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::time::Instant;

use libffi::middle::{Arg, Cif, CodePtr, Type};
use sha2::{Digest, Sha256};

use super::canary;
use super::device::{self, Buffer, Memory};
use super::papi::Papi;
use super::protocol::{Event, Request, RunArg, RunCase, write_frame};
use super::reap;
use super::window::Window;
use crate::corpus::{DType, Role};
use crate::sandbox::confine::Confinement;

/// The process the judge starts: a supervisor that forks the runner, waits
/// for it, removes whatever it left behind (see [`super::reap`]), reports how
/// it ended on the channel, and exits.
pub fn main(stdin: &mut impl Read, channel_fd: i32) -> i32 {
    reap::become_subreaper();
    // SAFETY: nothing in this process has started a thread yet, so the child
    // may go on running Rust code.
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!("runner: fork: {}", std::io::Error::last_os_error());
            2
        }
        0 => {
            // SAFETY: prctl only; the supervisor is single-threaded, so its death is reliable.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            std::process::exit(run(stdin, channel_fd))
        }
        child => supervise(child, channel_fd),
    }
}

fn supervise(child: libc::pid_t, channel_fd: i32) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(child, &mut status, 0) };
        if r == child
            || (r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
        {
            break;
        }
    }
    reap::kill_tree(std::process::id());
    // SAFETY: reaps the killed orphans, which are our children now.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) } > 0 {}
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else {
        (None, Some(libc::WTERMSIG(status)))
    };
    // SAFETY: the judge opened this descriptor for this process tree.
    let mut channel = unsafe { File::from_raw_fd(channel_fd) };
    let _ = write_frame(&mut channel, &Event::Ended { code, signal }, &[]);
    code.unwrap_or(128 + signal.unwrap_or(0))
}

/// The runner: runs the request read from `stdin`; returns its exit code.
fn run(stdin: &mut impl Read, channel_fd: i32) -> i32 {
    let mut text = String::new();
    if let Err(e) = stdin.read_to_string(&mut text) {
        eprintln!("runner: cannot read the request: {e}");
        return 2;
    }
    let request: Request = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runner: bad request: {e}");
            return 2;
        }
    };
    // SAFETY: the judge opened this descriptor for us; nothing else owns it here.
    let channel = unsafe { File::from_raw_fd(channel_fd) };
    // Processes the submission executes must not inherit the channel.
    // SAFETY: plain fcntl on our own descriptor.
    unsafe { libc::fcntl(channel_fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    let mut runner = Runner { channel };
    match runner.run(&request) {
        Ok(()) => {
            runner.send(&Event::Done, &[]);
            0
        }
        Err((stage, message)) => {
            runner.send(
                &Event::Failed {
                    stage: stage.into(),
                    message,
                },
                &[],
            );
            3
        }
    }
}

type Failure = (&'static str, String);

struct Runner {
    channel: File,
}

/// Calls in a row whose outputs' copy may be disturbed before the runner
/// gives up on a call (see [`super::window`]).
const SNAPSHOT_TRIES: u32 = 8;

/// One case's call: the symbol, its arguments, and the workspace cleared
/// before each call.
struct Call<'a> {
    cif: &'a Cif,
    code: CodePtr,
    args: &'a [Arg],
    workspace: Buffer,
    zeros: &'a [u8],
    /// Where a varied input is made, kept from call to call: a fresh
    /// allocation for each would map and fault in the array's pages again.
    varied: Vec<u8>,
}

/// What one call measured.
struct Timed {
    ns: u64,
    counters: Vec<(String, f64)>,
    /// From the call's return on.
    window: Window,
}

impl Call<'_> {
    /// Gives the kernel fresh inputs (the verified ones when `last`, varied
    /// for call `vary` when given) and a cleared workspace, then calls and
    /// times it.
    fn run(
        &mut self,
        arrays: &[ArrayState],
        last: bool,
        vary: Option<u32>,
        memory: &mut dyn Memory,
        papi: Option<&Papi>,
    ) -> Result<Timed, Failure> {
        for a in arrays {
            let input = a.input_for(last);
            let varied = vary
                .filter(|_| a.master.is_some())
                .and_then(|call| self::vary(input, a.dtype, call, &mut self.varied));
            memory
                .upload(a.buffer, varied.unwrap_or(input))
                .map_err(|e| ("copy", e))?;
        }
        if self.workspace.bytes > 0 {
            memory
                .upload(self.workspace, self.zeros)
                .map_err(|e| ("copy", e))?;
        }
        memory.sync().map_err(|e| ("sync", e))?;
        if let Some(p) = papi {
            p.start().map_err(|e| ("papi", e))?;
        }
        let start = Instant::now();
        // SAFETY: the argument types follow the ABI of the symbol; the
        // buffers are as large as the kernel's shapes say.
        unsafe { self.cif.call::<()>(self.code, self.args) };
        memory.sync().map_err(|e| ("sync", e))?;
        let returned = Instant::now();
        let window = Window::open(returned);
        let counters = match papi {
            Some(p) => p.stop().map_err(|e| ("papi", e))?,
            None => Vec::new(),
        };
        Ok(Timed {
            ns: (returned - start).as_nanos() as u64,
            counters,
            window,
        })
    }
}

/// One argument's value as libffi passes it; the storage must not move
/// between building the argument list and the call.
enum Value {
    Ptr(*mut c_void),
    I64(i64),
    F64(f64),
    F32(f32),
}

struct ArrayState {
    name: String,
    role: Role,
    dtype: DType,
    buffer: Buffer,
    /// The trusted copy of an input, read before confinement.
    master: Option<Vec<u8>>,
    /// The input of every call but the last, when the case has one.
    earlier: Option<Vec<u8>>,
    canary: Vec<u8>,
    input_modified: bool,
}

impl ArrayState {
    /// What the array holds when a call starts: its input (the earlier one
    /// before every call but the last), else the canary.
    fn input_for(&self, last: bool) -> &[u8] {
        let earlier = self.earlier.as_deref().filter(|_| !last);
        earlier
            .or(self.master.as_deref())
            .unwrap_or(self.canary.as_slice())
    }
}

impl Runner {
    fn send(&mut self, event: &Event, payload: &[u8]) {
        // If the judge is gone there is nobody to tell.
        let _ = write_frame(&mut self.channel, event, payload);
    }

    fn run(&mut self, request: &Request) -> Result<(), Failure> {
        let masters = read_inputs(request)?;
        if let Some(id) = request.run_as {
            // SAFETY: getppid and prctl take no pointers.
            let supervisor = unsafe { libc::getppid() };
            crate::sandbox::confine::become_user(id).map_err(|e| ("privileges", e))?;
            // Changing user clears the parent-death signal: ask for it again,
            // and leave if the supervisor died in between.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            if unsafe { libc::getppid() } != supervisor {
                return Err(("privileges", "the supervisor is gone".into()));
            }
        }
        let mut read = request.readable.clone();
        read.push(request.sandbox.clone());
        let confinement = Confinement {
            read,
            write: vec![request.sandbox.clone()],
        };
        let enforcement = confinement.apply().map_err(|e| ("confine", e))?;
        self.send(
            &Event::Confined {
                enforcement,
                network_isolated: network_isolated(),
            },
            &[],
        );
        let mut memory = device::for_language(request.language).map_err(|e| ("device", e))?;
        default_fault_actions();
        // Every symbol bound now (not at first use): a library that
        // references a function nothing defines is refused here, as a
        // build error, instead of the dynamic linker ending the process
        // mid-call.
        let now = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
        // SAFETY: loading runs the library's initializers: that is the
        // untrusted code this process exists to contain.
        let library: libloading::Library =
            unsafe { libloading::os::unix::Library::open(Some(&request.library), now) }
                .map_err(|e| {
                    // dlerror()'s text (which symbol, which file) is the source.
                    let why =
                        std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
                    ("load", why)
                })?
                .into();
        // SAFETY: only the address is taken; the call goes through libffi with
        // the signature the ABI defines.
        let symbol =
            unsafe { library.get::<*const c_void>(request.symbol.as_bytes()) }.map_err(|_| {
                (
                    "symbol",
                    format!("the library does not export {}", request.symbol),
                )
            })?;
        let code = CodePtr(*symbol as *mut c_void);
        self.send(&Event::Loaded, &[]);
        let papi = if request.papi_events.is_empty() {
            None
        } else {
            Some(Papi::open(&request.papi_events).map_err(|e| ("papi", e))?)
        };
        let mut masters = masters.into_iter();
        for (index, case) in request.cases.iter().enumerate() {
            let case_masters = masters.next().unwrap_or_default();
            self.run_case(
                index,
                case,
                case_masters,
                memory.as_mut(),
                code,
                papi.as_ref(),
            )?;
        }
        // Keep the library mapped until every call is done.
        drop(library);
        Ok(())
    }

    fn run_case(
        &mut self,
        index: usize,
        case: &RunCase,
        masters: Vec<Masters>,
        memory: &mut dyn Memory,
        code: CodePtr,
        papi: Option<&Papi>,
    ) -> Result<(), Failure> {
        let mut arrays = Vec::new();
        let mut values = Vec::new();
        let mut types = Vec::new();
        let mut workspace = Buffer {
            ptr: std::ptr::null_mut(),
            bytes: 0,
        };
        let mut masters = masters.into_iter();
        for arg in &case.args {
            match arg {
                RunArg::Array {
                    name,
                    dtype,
                    role,
                    elements,
                    ..
                } => {
                    let bytes = elements * dtype.size();
                    let buffer = memory.alloc(bytes).map_err(|e| ("alloc", e))?;
                    values.push(Value::Ptr(buffer.ptr));
                    types.push(Type::pointer());
                    let (master, earlier) = masters.next().unwrap_or_default();
                    arrays.push(ArrayState {
                        name: name.clone(),
                        role: *role,
                        dtype: *dtype,
                        buffer,
                        master,
                        earlier,
                        canary: canary::fill(*dtype, *elements),
                        input_modified: false,
                    });
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
                RunArg::Workspace(bytes) => {
                    workspace = memory.alloc(*bytes as usize).map_err(|e| ("alloc", e))?;
                    values.push(Value::Ptr(workspace.ptr));
                    types.push(Type::pointer());
                }
            }
        }
        let zeros = vec![0u8; workspace.bytes];
        let cif = Cif::new(types, Type::void());
        let args: Vec<Arg> = values
            .iter()
            .map(|v| match v {
                Value::Ptr(p) => Arg::new(p),
                Value::I64(i) => Arg::new(i),
                Value::F64(f) => Arg::new(f),
                Value::F32(f) => Arg::new(f),
            })
            .collect();
        let total = case.warmup + case.reps;
        // Calls [0, same) see the same inputs: the determinism check compares
        // the first of them with the last two.
        let same = if arrays.iter().any(|a| a.earlier.is_some()) {
            total.saturating_sub(1)
        } else {
            total
        };
        let mut call = Call {
            cif: &cif,
            code,
            args: &args,
            workspace,
            zeros: &zeros,
            varied: Vec::new(),
        };
        // Device outputs are downloaded, which may sleep, so the window
        // cannot tell; work a device kernel leaves is waited for by the
        // device sync before the timer stops.
        let watch_window = arrays
            .iter()
            .filter(|a| a.role.is_output())
            .all(|a| memory.host_view(a.buffer).is_some());
        let mut counters: BTreeMap<String, f64> = BTreeMap::new();
        let mut last_outputs = Vec::new();
        for rep in 0..total {
            let last = rep + 1 == total;
            let warmup = rep < case.warmup;
            let papi = papi.filter(|_| !warmup);
            // The first call, and the last two on the same inputs (so a
            // result that alternates between calls shows).
            let digest = case.digests && (rep == 0 || (rep < same && rep + 2 >= same));
            let snapshot = digest || (last && case.send_outputs);
            // Not the calls the determinism check compares, nor the last.
            let vary = (rep > 0 && rep + 2 < same).then_some(rep);
            let mut tries = 0;
            // The call's time is its first try's: a call is made again only
            // to copy its outputs undisturbed, and a kernel that disturbed
            // the copy on purpose must not replay a faster answer for the
            // time of the verified call, which bounds the kernel's.
            let mut first_ns = None;
            let (timed, outputs) = loop {
                let timed = call.run(&arrays, last, vary, memory, papi)?;
                first_ns.get_or_insert(timed.ns);
                if !snapshot {
                    break (timed, None);
                }
                // Before anything else: a thread the kernel left computing
                // must not finish the answer while the judge looks.
                let outputs = read_outputs(&arrays, memory)?;
                if !watch_window || timed.window.held() {
                    break (timed, Some(outputs));
                }
                tries += 1;
                if tries == SNAPSHOT_TRIES {
                    let (on, off) = timed.window.times();
                    return Err((
                        "snapshot",
                        format!(
                            "in {tries} calls in a row the runner lost its CPU between the call's \
                             return and the copy of its outputs (the last time {off:?} off \
                             it, {on:?} on it), so no copy shows what the call itself computed: \
                             threads the kernel left running took the runner's CPU, or the \
                             node is overloaded"
                        ),
                    ));
                }
            };
            for (name, value) in timed.counters {
                *counters.entry(name).or_default() += value;
            }
            if let Some(outputs) = outputs {
                if digest {
                    self.send_digest(index, rep, &outputs);
                }
                if last {
                    last_outputs = outputs;
                }
            }
            self.check_inputs(index, rep, total, &mut arrays, memory)?;
            self.send_rep(index, rep, first_ns.unwrap_or(timed.ns), warmup);
        }
        if !counters.is_empty() {
            let reps = case.reps.max(1) as f64;
            counters.values_mut().for_each(|v| *v /= reps);
            self.send(
                &Event::Counters {
                    case: index,
                    values: counters,
                },
                &[],
            );
        }
        let outputs = arrays.iter().filter(|a| a.role.is_output());
        for (a, bytes) in outputs.zip(&last_outputs) {
            self.send(
                &Event::Output {
                    case: index,
                    array: a.name.clone(),
                },
                bytes,
            );
        }
        Ok(())
    }

    fn send_digest(&mut self, case: usize, rep: u32, outputs: &[Vec<u8>]) {
        let mut hash = Sha256::new();
        outputs.iter().for_each(|bytes| hash.update(bytes));
        let digest = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.send(&Event::OutputDigest { case, rep, digest }, &[]);
    }

    fn send_rep(&mut self, case: usize, rep: u32, ns: u64, warmup: bool) {
        self.send(
            &Event::Rep {
                case,
                rep,
                ns,
                warmup,
            },
            &[],
        );
    }

    /// Reports each input array the kernel wrote to (once per array), after
    /// the first and the last call.
    fn check_inputs(
        &mut self,
        case: usize,
        rep: u32,
        total: u32,
        arrays: &mut [ArrayState],
        memory: &mut dyn Memory,
    ) -> Result<(), Failure> {
        let last = rep + 1 == total;
        if rep != 0 && !last {
            return Ok(());
        }
        for a in arrays
            .iter_mut()
            .filter(|a| a.role == Role::In && !a.input_modified)
        {
            let now = read_buffer(a.buffer, memory)?;
            if now.as_slice() != a.input_for(last) {
                a.input_modified = true;
                self.send(
                    &Event::InputModified {
                        case,
                        array: a.name.clone(),
                    },
                    &[],
                );
            }
        }
        Ok(())
    }
}

/// Rust's runtime handles SIGSEGV and SIGBUS to report its own stack
/// overflows, and aborts (SIGABRT) when a fault lands in the main thread's
/// guard page. A submission that overflows its stack then ended by SIGSEGV
/// or by SIGABRT depending on where its frames met the guard, so the same
/// source got two verdicts. From here on only the submission's code runs:
/// faults take their default action, and the judge sees the signal itself.
fn default_fault_actions() {
    for signal in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: restores a default disposition; no handler runs.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

/// `input`, a float array, as call `call` sees it: every element that is
/// finite and not zero has its lowest mantissa bits flipped by a mask that
/// differs from call to call (up to 1,023 calls), a change of at most 2^-13
/// of the value in fp32 and 2^-42 in fp64. So no two such calls see the
/// same values, and a kernel that caches its answers by its inputs' values
/// (all of them or any sample) cannot answer a timed call from memory. Zeros,
/// subnormals, infinities and NaNs stay as they are, so no call takes a
/// slower path than its input would; integer arrays (sizes, indices) are not
/// changed at all (`None`). Only outputs of the last call are verified.
/// The varied copy is made in `varied`.
fn vary<'a>(input: &[u8], dtype: DType, call: u32, varied: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    let mask = u64::from(call % 1023 + 1);
    if matches!(dtype, DType::I32 | DType::I64) {
        return None;
    }
    varied.clear();
    varied.extend_from_slice(input);
    if dtype == DType::F64 {
        varied.chunks_exact_mut(8).for_each(|e| {
            let bits = u64::from_ne_bytes(e.try_into().expect("8 bytes"));
            let exponent = (bits >> 52) & 0x7ff;
            if exponent != 0 && exponent != 0x7ff {
                e.copy_from_slice(&(bits ^ mask).to_ne_bytes());
            }
        });
    } else {
        varied.chunks_exact_mut(4).for_each(|e| {
            let bits = u32::from_ne_bytes(e.try_into().expect("4 bytes"));
            let exponent = (bits >> 23) & 0xff;
            if exponent != 0 && exponent != 0xff {
                e.copy_from_slice(&(bits ^ mask as u32).to_ne_bytes());
            }
        });
    }
    Some(varied)
}

fn read_buffer(buffer: Buffer, memory: &mut dyn Memory) -> Result<Vec<u8>, Failure> {
    if let Some(view) = memory.host_view(buffer) {
        return Ok(view.to_vec());
    }
    let mut out = vec![0u8; buffer.bytes];
    memory.download(buffer, &mut out).map_err(|e| ("copy", e))?;
    Ok(out)
}

/// Every output array's bytes, in argument order.
fn read_outputs(arrays: &[ArrayState], memory: &mut dyn Memory) -> Result<Vec<Vec<u8>>, Failure> {
    arrays
        .iter()
        .filter(|a| a.role.is_output())
        .map(|a| read_buffer(a.buffer, memory))
        .collect()
}

/// An array's input for the last call and, when it has one, for the others.
type Masters = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Every case's input arrays, read while the files are still reachable.
fn read_inputs(request: &Request) -> Result<Vec<Vec<Masters>>, Failure> {
    request
        .cases
        .iter()
        .map(|case| {
            case.args
                .iter()
                .filter_map(|arg| match arg {
                    RunArg::Array {
                        input,
                        earlier,
                        dtype,
                        elements,
                        ..
                    } => Some((input, earlier, elements * dtype.size())),
                    _ => None,
                })
                .map(|(input, earlier, bytes)| {
                    Ok((read_input(input, bytes)?, read_input(earlier, bytes)?))
                })
                .collect()
        })
        .collect()
}

fn read_input(path: &Option<std::path::PathBuf>, bytes: usize) -> Result<Option<Vec<u8>>, Failure> {
    let Some(path) = path else {
        return Ok(None);
    };
    let data = std::fs::read(path).map_err(|e| ("inputs", format!("{}: {e}", path.display())))?;
    if data.len() != bytes {
        return Err((
            "inputs",
            format!("{} holds {} bytes, not {bytes}", path.display(), data.len()),
        ));
    }
    Ok(Some(data))
}

/// True when the process sees no network interface but loopback.
fn network_isolated() -> bool {
    std::fs::read_to_string("/proc/net/dev").is_ok_and(|text| {
        text.lines()
            .skip(2)
            .filter_map(|l| l.split(':').next())
            .all(|name| name.trim() == "lo")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f64s(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    fn back(bytes: &[u8]) -> Vec<f64> {
        bytes
            .chunks_exact(8)
            .map(|e| f64::from_ne_bytes(e.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn each_call_sees_other_values_and_nothing_changes_its_regime() {
        let special = [0.0, -0.0, f64::MIN_POSITIVE / 4.0, f64::INFINITY];
        let input = f64s(&[
            1.0, -2.5, 3.0e100, special[0], special[1], special[2], special[3],
        ]);
        let mut seen = std::collections::HashSet::new();
        for call in 1..=1023 {
            let varied = vary(&input, DType::F64, call, &mut Vec::new())
                .unwrap()
                .to_vec();
            assert!(
                seen.insert(varied.clone()),
                "call {call} repeats an earlier call"
            );
            let values = back(&varied);
            for (got, was) in values.iter().zip([1.0, -2.5, 3.0e100]) {
                assert_ne!(*got, was);
                assert!(((got - was) / was).abs() < 1e-12, "{got} from {was}");
            }
            assert_eq!(&varied[24..], &input[24..], "zeros, subnormals, inf kept");
        }
        let nan = f64s(&[f64::NAN]);
        assert_eq!(vary(&nan, DType::F64, 5, &mut Vec::new()).unwrap(), nan);
        let f32s: Vec<u8> = [1.5f32, 0.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut scratch = vec![9; 64];
        let varied = vary(&f32s, DType::F32, 1023, &mut scratch).unwrap();
        let first = f32::from_ne_bytes(varied[..4].try_into().unwrap());
        assert!(
            first != 1.5 && ((first - 1.5) / 1.5).abs() < 2e-4,
            "{first}"
        );
        assert_eq!(&varied[4..], &f32s[4..]);
        assert_eq!(
            vary(&[1, 2, 3, 4], DType::I32, 1, &mut Vec::new()),
            None,
            "indices stay"
        );
    }
}
