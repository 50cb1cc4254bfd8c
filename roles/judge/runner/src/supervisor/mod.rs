//! `hpcagent judge exec`: the supervisor of one run, and its clock.
//!
//! The judge starts it with the run's request on stdin and a channel for its
//! reports (descriptor 3). It starts the submission's runner, and the
//! baseline's when the run has timed pairs, each in namespaces of its own
//! and held by it ([`super::child`]), then goes through the request's steps:
//!
//! - a check calls the submission on known inputs and reads its outputs
//!   back for the judge to verify against the reference;
//! - timed pairs call the baseline and the submission on the same fresh
//!   inputs (drawn from a secret of this grade, so nothing can be computed
//!   ahead), in rounds of one pair in each order (which first, drawn),
//!   under the node's timing lock, and compare their outputs; they go on
//!   until the verdict is decided or their time is up ([`crate::timing`]);
//! - a batch makes several checks' calls in one continue of the
//!   submission's runner, their inputs all written first, and times them
//!   together: the round trip is paid once for them all, and every
//!   call's outputs are read back and checked as its own check's;
//! - a profile calls the submission on known inputs for a while.
//!
//! Every call is timed here, from outside the runner ([`super::child`]),
//! and its inputs are written and outputs read here, in this process's own
//! mapping of the run's buffers, while every runner is stopped
//! ([`super::buffers`]). Before every call the inputs hold their values
//! for it, the outputs hold canaries and the workspace zeros. The arrays a
//! kernel only reads are mapped read-only in both runners: no call can
//! change them, so they are written once for all the calls on the same
//! values, and a write to one ends the runner by a fault at its address,
//! which says whose input it was ([`Run::written_input`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

mod arrays;
mod cpus;
mod spread;
mod timing_lock;

use arrays::{Bytes, Values, region_sizes};
use cpus::Cpus;
use timing_lock::TimingLock;

use super::buffers::{Layout, Mapping, read_only_regions};
use hpcagent_sandbox::hold::ChildSignals;

use super::child::{Child, Gone, Start};
use super::floor::{FLOOR_CALLS, Floor};
use super::process::{FLOOR, MAX_BATCH};
use super::protocol::{
    CallBudget, Event, Isolation, Report, Request, RunArg, RunnerSetup, Side, Step, write_frame,
};
use crate::timing::{Order, StopRule};
use hpcagent_corpus::Tolerance;

/// The channel to the judge.
pub const CHANNEL_FD: i32 = 3;

/// How long a runner may take to start, confine itself and load its library.
const STARTUP: Duration = Duration::from_secs(30);

/// Runs the supervisor: the request from `stdin`; its exit code.
pub fn main(stdin: &mut impl Read) -> i32 {
    // The supervisor dies with the judge that started it.
    hpcagent_sandbox::reap::die_with_parent(libc::SIGKILL);
    // SAFETY: the judge opened this descriptor for this process.
    let mut channel = unsafe { File::from_raw_fd(CHANNEL_FD) };
    let mut text = String::new();
    let request: Request = match stdin
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            fail(&mut channel, Side::Candidate, "request", e);
            return 2;
        }
    };
    match Run::start(&request, &mut channel) {
        Ok(mut run) => {
            run.steps(&request);
            run.finish();
            0
        }
        Err(()) => 3,
    }
}

fn fail(channel: &mut File, side: Side, stage: &str, message: String) {
    send(
        channel,
        &Event::Failed {
            side,
            stage: stage.into(),
            message,
        },
        &[],
    );
}

fn send(channel: &mut File, event: &Event, payload: &[u8]) {
    // A judge that is gone hears nothing.
    let _ = write_frame(channel, event, payload);
}

/// A run in progress.
struct Run<'a> {
    channel: &'a mut File,
    candidate: Child,
    baseline: Option<Child>,
    /// This process's mapping of the run's shared buffers.
    buffers: Mapping,
    layout: Layout,
    request: &'a Request,
    /// The node's timing lock, opened by this process alone (close-on-exec):
    /// its lock goes with this process, and no runner holds a copy.
    lock: Option<TimingLock>,
    /// The baseline's call times so far, sorted (the candidate's budget
    /// follows their median).
    baseline_ns: Vec<u64>,
    /// Input files mapped once, by path.
    files: HashMap<PathBuf, Rc<Bytes>>,
    cpus: Cpus,
    over: bool,
    /// The submission's calls so far, and which of them were timed pairs'
    /// (by their place in that order): on a device, its runner reports
    /// each call's device time in the same order.
    candidate_calls: usize,
    timed_calls: Vec<usize>,
    /// The step being run.
    step: usize,
}

impl<'a> Run<'a> {
    fn start(request: &'a Request, channel: &'a mut File) -> Result<Run<'a>, ()> {
        if request.namespaces
            && let Err(e) = hpcagent_sandbox::namespaces::own_pid_namespace()
        {
            fail(channel, Side::Candidate, "namespaces", e.to_string());
            return Err(());
        }
        hpcagent_sandbox::reap::become_subreaper();
        // Before any thread: they inherit SIGCHLD blocked.
        let events = match ChildSignals::new() {
            Ok(events) => Rc::new(events),
            Err(e) => {
                fail(channel, Side::Candidate, "start", e.to_string());
                return Err(());
            }
        };
        let lock = match &request.timing_lock {
            None => None,
            Some(path) => match TimingLock::open(path, request.timing_device) {
                Ok(lock) => Some(lock),
                Err(e) => {
                    let message = format!("the timing lock {}: {e}", path.display());
                    fail(channel, Side::Candidate, "lock", message);
                    return Err(());
                }
            },
        };
        let sizes = region_sizes(request);
        let layout = Layout::new(&sizes);
        let made = Mapping::create(&layout).and_then(|(memfd, buffers, backing)| {
            Ok((
                Mapping::read_only(memfd.as_raw_fd())?,
                memfd,
                buffers,
                backing,
            ))
        });
        let (read_only, memfd, buffers, backing) = match made {
            Ok(made) => made,
            Err(e) => {
                fail(channel, Side::Candidate, "buffers", e.to_string());
                return Err(());
            }
        };
        send(channel, &Event::Buffers(backing.describe()), &[]);
        let exe = match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                fail(channel, Side::Candidate, "start", format!("own path: {e}"));
                return Err(());
            }
        };
        let env: Vec<(String, String)> = std::env::vars().collect();
        let null = File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|_| ())?;
        let start = |output: (i32, i32)| Start {
            exe: &exe,
            env: &env,
            null: null.as_raw_fd(),
            buffers: memfd.as_raw_fd(),
            buffers_read_only: read_only.as_raw_fd(),
            output,
            limits: &request.limits,
            namespaces: request.namespaces,
            own_network: request.profile_output.is_none(),
            trace: request.trace,
            events: &events,
        };
        let setup = |library: &Path, sandbox: &Path, papi: bool| RunnerSetup {
            library: library.to_path_buf(),
            symbol: request.symbol.clone(),
            language: request.language,
            arrays: request.arrays.clone(),
            offsets: layout.offsets.clone(),
            sizes: layout.sizes.clone(),
            buffer_bytes: layout.total,
            calls: request.calls.clone(),
            sandbox: sandbox.to_path_buf(),
            readable: request.readable.clone(),
            run_as: request.run_as,
            papi_events: if papi {
                request.papi_events.clone()
            } else {
                Vec::new()
            },
            profile_output: request.profile_output.clone(),
        };
        // Both runners start before either is waited for: each spends its
        // start in exec, its walls and its library's load, which on a slot
        // of two CPUs overlap. Neither is timed until both are ready and
        // held, and neither can reach the other meanwhile.
        let mut baseline = match &request.baseline {
            None => None,
            Some(library) => {
                let dir = library.parent().unwrap_or(Path::new("/"));
                let quiet = (null.as_raw_fd(), null.as_raw_fd());
                match Child::start(&setup(library, dir, false), &start(quiet)) {
                    Ok(child) => Some(child),
                    Err(e) => {
                        fail(channel, Side::Baseline, "start", e.to_string());
                        return Err(());
                    }
                }
            }
        };
        let own = (libc::STDOUT_FILENO, libc::STDERR_FILENO);
        let mut candidate = match Child::start(
            &setup(&request.candidate, &request.sandbox, true),
            &start(own),
        ) {
            Ok(child) => child,
            Err(e) => {
                fail(channel, Side::Candidate, "start", e.to_string());
                return Err(());
            }
        };
        if let Some(child) = baseline.as_mut()
            && let Err(gone) = child.ready(STARTUP, |_| {})
        {
            report_gone(channel, Side::Baseline, gone);
            return Err(());
        }
        let namespaces = request.namespaces;
        let held = candidate.traced();
        let ready = candidate.ready(STARTUP, |report| {
            if let Report::Confined { landlock, seccomp } = report {
                let isolation = Isolation {
                    namespaces,
                    landlock,
                    seccomp,
                    held,
                };
                send(channel, &Event::Isolated(isolation), &[]);
            }
        });
        if let Err(gone) = ready {
            report_gone(channel, Side::Candidate, gone);
            return Err(());
        }
        send(channel, &Event::Loaded, &[]);
        let cpus = Cpus::new(&request.limits.cpus);
        cpus.beside_held();
        Ok(Run {
            channel,
            candidate,
            baseline,
            buffers,
            layout,
            request,
            lock,
            baseline_ns: Vec::new(),
            files: HashMap::new(),
            cpus,
            over: false,
            candidate_calls: 0,
            timed_calls: Vec::new(),
            step: 0,
        })
    }

    fn steps(&mut self, request: &Request) {
        let mut index = 0;
        while let Some(step) = request.steps.get(index) {
            if self.over {
                return;
            }
            self.step = index;
            match step {
                Step::Batch { checks } => {
                    let end = (index + 1 + *checks as usize).min(request.steps.len());
                    self.batch(index, &request.steps[index + 1..end], *checks);
                    index = end - 1;
                }
                Step::Check {
                    call,
                    inputs,
                    calls,
                    outputs,
                    digest,
                    ..
                } => self.check(index, *call, inputs, *calls, *outputs, *digest),
                Step::Pairs {
                    call,
                    seed,
                    stop,
                    tolerance,
                    sets,
                } => self.pairs(*call, seed, sets, *stop, *tolerance),
                Step::Profile {
                    call,
                    inputs,
                    seconds,
                    fewest,
                    most,
                } => self.profile(index, *call, inputs, *seconds, *fewest, *most),
                Step::Floor { calls } => {
                    if let Some(floor) = self.floor(*calls as usize) {
                        send(self.channel, &Event::Floor(floor), &[]);
                    }
                }
            }
            index += 1;
        }
        if !self.over {
            send(self.channel, &Event::Done, &[]);
        }
    }

    /// Lets the submission's runner end on its own (its buffered output
    /// flushed, its counters reported) and kills what is left.
    fn finish(self) {
        self.cpus.apart();
        let Run {
            channel,
            candidate,
            baseline,
            over,
            timed_calls,
            ..
        } = self;
        drop(baseline);
        if over {
            return;
        }
        for report in candidate.finish(Duration::from_secs(10)) {
            match report {
                Report::Counters { values } => send(channel, &Event::Counters { values }, &[]),
                Report::DeviceTimes { ns } => {
                    let ns = timed_calls
                        .iter()
                        .filter_map(|&i| ns.get(i).copied())
                        .collect();
                    send(channel, &Event::DeviceTimes { ns }, &[]);
                }
                _ => {}
            }
        }
    }

    /// The submission alone on known inputs, `calls` times.
    fn check(
        &mut self,
        step: usize,
        call: usize,
        inputs: &[Option<PathBuf>],
        calls: u32,
        outputs: bool,
        digest: bool,
    ) {
        let Some(values) = self.read_inputs(inputs) else {
            return;
        };
        // With `digest`, every call's outputs are held against the first
        // call's: a step of several calls is its own determinism check. A
        // call that differs sends its own digest; comparing costs a memcmp
        // where hashing every call would cost more than a call of a small
        // kernel. Outputs are hashed and sent from the buffers themselves;
        // only a step of several calls keeps a copy, of its first call's.
        let mut first: Vec<Vec<u8>> = Vec::new();
        for n in 0..calls {
            let Some(ns) = self.call_candidate(call, &values, n == 0) else {
                return;
            };
            send(self.channel, &Event::Call { step, ns }, &[]);
            let last = n + 1 == calls;
            if !digest && !last {
                continue;
            }
            let produced = arrays::output_regions(self.request, &self.layout, &self.buffers, call);
            let differs = n > 0
                && !first
                    .iter()
                    .map(Vec::as_slice)
                    .eq(produced.iter().map(|r| r.1));
            if digest && (n == 0 || differs) {
                let digest = digest_of(self.cpus.every(), produced.iter().map(|r| r.1));
                send(self.channel, &Event::OutputDigest { step, digest }, &[]);
            }
            if last && outputs {
                send_outputs(self.channel, step, &produced);
            }
            if n == 0 && !last {
                first = produced.iter().map(|r| r.1.to_vec()).collect();
            }
        }
    }

    /// A batch (step `step`): the `count` checks after it, one call each,
    /// made in one continue of the submission's runner and timed as one
    /// interval; then each check's outputs, as its own.
    fn batch(&mut self, step: usize, checks: &[Step], count: u32) {
        let sets = match batched(&self.request.calls, step, checks, count) {
            Ok(sets) => sets,
            Err(message) => {
                self.over = true;
                fail(self.channel, Side::Candidate, "batch", message);
                return;
            }
        };
        for set in &sets {
            let Some(values) = self.read_inputs(set.inputs) else {
                return;
            };
            self.load(set.call, &values);
        }
        let indices: Vec<u32> = sets.iter().map(|set| set.call as u32).collect();
        let Some(ns) = self.round_trip(Side::Candidate, &indices) else {
            return;
        };
        self.candidate_calls += sets.len();
        send(
            self.channel,
            &Event::Batch {
                step,
                calls: count,
                ns,
            },
            &[],
        );
        for set in &sets {
            let produced =
                arrays::output_regions(self.request, &self.layout, &self.buffers, set.call);
            if set.digest {
                let digest = digest_of(self.cpus.every(), produced.iter().map(|r| r.1));
                let event = Event::OutputDigest {
                    step: set.step,
                    digest,
                };
                send(self.channel, &event, &[]);
            }
            if set.outputs {
                send_outputs(self.channel, set.step, &produced);
            }
        }
    }

    /// The submission on known inputs, calls for `seconds`, between
    /// `fewest` and `most` of them.
    fn profile(
        &mut self,
        step: usize,
        call: usize,
        inputs: &[Option<PathBuf>],
        seconds: f64,
        fewest: u32,
        most: u32,
    ) {
        let Some(values) = self.read_inputs(inputs) else {
            return;
        };
        let mut spent = 0u64;
        for n in 0..most {
            if n >= fewest && spent as f64 / 1e9 >= seconds {
                break;
            }
            let Some(ns) = self.call_candidate(call, &values, n == 0) else {
                return;
            };
            spent += ns;
            send(self.channel, &Event::Call { step, ns }, &[]);
        }
    }

    /// Timed pairs on fresh inputs (or each on copies of the next of
    /// `sets`, when given, until they run out), until `stop`.
    fn pairs(
        &mut self,
        call: usize,
        seed: &[u8; 32],
        sets: &[Vec<Option<PathBuf>>],
        stop: StopRule,
        tolerance: Tolerance,
    ) {
        let timed = tolerance.for_timed_calls();
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        // The node's timing lock is held through all the pairs, not each
        // pair alone: between two pairs this supervisor draws inputs and
        // compares answers on the CPU the calls run on, and another judge's
        // doing so between our calls made the same code measure 0.85x to
        // 1.08x itself with two judges on a 2-core machine.
        let _held = self.lock.as_ref().map(TimingLock::take);
        // The cap counts the step's whole time (drawing inputs, comparing
        // answers), not only the calls': it bounds what a grade costs.
        let started = Instant::now();
        // Reused from pair to pair: arrays of megabytes allocated anew each
        // time cost their page faults on every pair.
        let mut values = Vec::new();
        let mut saved = Vec::new();
        let mut floor = None;
        let mut order = Order::new(crate::draw::seeded_rng(&[seed, b"order"]));
        for n in 0u32.. {
            if n > 0 && stop.enough(&pairs, started.elapsed().as_millis() as u64) {
                return;
            }
            if sets.is_empty() {
                self.fresh(call, seed, n, &mut values);
            } else {
                // Read for this pair alone: a grade's sets may not fit in
                // memory together.
                let Some(files) = sets.get(n as usize) else {
                    return;
                };
                match self.read_set(files) {
                    Some(set) => values = set,
                    None => return,
                }
                self.place(call, &values);
            }
            let values = &values;
            // Neither gains from the order, and no rhythm keeps to it.
            let first = if order.baseline_first(n) {
                Side::Baseline
            } else {
                Side::Candidate
            };
            let Some((baseline_ns, candidate_ns)) = self.pair(call, values, first, &mut saved)
            else {
                return;
            };
            // The second call's outputs are still in the buffers; the
            // first's were saved.
            let saved_outputs: Vec<&[u8]> = saved.iter().map(Vec::as_slice).collect();
            let in_buffers: Vec<&[u8]> =
                self.output_regions(call).into_iter().map(|r| r.1).collect();
            let (ours, theirs) = match first {
                Side::Baseline => (&saved_outputs, &in_buffers),
                Side::Candidate => (&in_buffers, &saved_outputs),
            };
            if let Some(message) = self.compare(call, ours, theirs, timed) {
                // The pairs end here, the run does not: whether the public
                // case is right tells an overfit kernel from a wrong one.
                send(self.channel, &Event::Mismatch { message }, &[]);
                return;
            }
            // The first pair warms both up; the floor is measured after it,
            // with both runners warm, and taken out of every pair's times.
            if n == 0 {
                let Some(measured) = self.floor(FLOOR_CALLS) else {
                    return;
                };
                send(self.channel, &Event::Floor(measured), &[]);
                floor = Some(measured);
            } else if let Some(floor) = floor {
                let (baseline_ns, candidate_ns) = (floor.net(baseline_ns), floor.net(candidate_ns));
                // Both calls of the pair are made: the submission's is the
                // last, or the one before the baseline's last.
                self.timed_calls.push(self.candidate_calls - 1);
                pairs.push((baseline_ns, candidate_ns));
                let event = Event::Pair {
                    baseline_ns,
                    candidate_ns,
                };
                send(self.channel, &event, &[]);
            }
        }
    }

    /// One pair, `first` first, on the read-only inputs in place and the
    /// rest of `values` written before each call: the first call's outputs
    /// copied into `saved` right after it, the second's left in the
    /// buffers. Its (baseline, candidate) times, or `None` when the run is
    /// over.
    fn pair(
        &mut self,
        call: usize,
        values: &Values,
        first: Side,
        saved: &mut Vec<Vec<u8>>,
    ) -> Option<(u64, u64)> {
        let second = match first {
            Side::Baseline => Side::Candidate,
            Side::Candidate => Side::Baseline,
        };
        let mut times = (0, 0);
        for (n, side) in [first, second].into_iter().enumerate() {
            self.reload(call, values);
            let ns = self.time(side, call)?;
            match side {
                Side::Baseline => times.0 = ns,
                Side::Candidate => times.1 = ns,
            }
            if n == 0 {
                self.read_outputs(call, saved);
            }
        }
        Some(times)
    }

    /// One call of the submission on `values`: all of them written, on
    /// the `first` call of a step, else all but the read-only inputs, which
    /// no call can change.
    fn call_candidate(&mut self, call: usize, values: &Values, first: bool) -> Option<u64> {
        match first {
            true => self.load(call, values),
            false => self.reload(call, values),
        }
        self.time(Side::Candidate, call)
    }

    /// Tells a runner that died of a write to an input as such: the
    /// submission's is `InputModified`, the baseline's the harness's. A
    /// fault elsewhere, or a runner gone otherwise, is said as it is.
    fn lost(&mut self, side: Side, gone: Gone) {
        self.over = true;
        let Some(array) = self.written_input(side, &gone) else {
            return report_gone(self.channel, side, gone);
        };
        match side {
            Side::Candidate => {
                let event = Event::InputModified {
                    step: self.step,
                    array,
                };
                send(self.channel, &event, &[]);
            }
            Side::Baseline => {
                let message = format!("the baseline changed its input {array}");
                fail(self.channel, Side::Baseline, "inputs", message);
            }
        }
    }

    /// The read-only input whose region `side`'s runner faulted in, where
    /// it died of that fault.
    fn written_input(&self, side: Side, gone: &Gone) -> Option<String> {
        let Gone::Ended {
            signal: Some(libc::SIGSEGV | libc::SIGBUS),
            ..
        } = gone
        else {
            return None;
        };
        let child = match side {
            Side::Baseline => self.baseline.as_ref()?,
            Side::Candidate => &self.candidate,
        };
        let address = child
            .fault()?
            .address
            .checked_sub(super::buffers::ADDRESS)? as usize;
        let arrays = &self.request.arrays;
        read_only_regions(arrays, &self.layout.offsets, &self.layout.sizes)
            .find(|(_, region)| region.contains(&address))
            .map(|(index, _)| arrays[index].name.clone())
    }

    /// Calls `side`'s runner; `None` (and the run is over) when it is gone.
    fn time(&mut self, side: Side, call: usize) -> Option<u64> {
        let ns = self.round_trip(side, &[call as u32])?;
        match side {
            Side::Baseline => {
                let at = self.baseline_ns.partition_point(|&t| t <= ns);
                self.baseline_ns.insert(at, ns);
            }
            Side::Candidate => self.candidate_calls += 1,
        }
        Some(ns)
    }

    /// The runner's floor: `calls` calls (at least one) that call nothing,
    /// made on the baseline's runner as its timed calls are
    /// ([`super::floor`]).
    fn floor(&mut self, calls: usize) -> Option<Floor> {
        let mut times = Vec::with_capacity(calls.max(1));
        for _ in 0..calls.max(1) {
            times.push(self.round_trip(Side::Baseline, &[FLOOR])?);
        }
        Some(Floor::of(&mut times))
    }

    /// Makes the calls `indices` on `side`'s runner (one, or a batch) and
    /// times them; `None` (and the run is over) when the runner is gone.
    fn round_trip(&mut self, side: Side, indices: &[u32]) -> Option<u64> {
        let budget = self.budget(side) * indices.len() as u32;
        let child = match side {
            Side::Baseline => self.baseline.as_mut()?,
            Side::Candidate => &mut self.candidate,
        };
        self.cpus.apart();
        let called = match indices {
            [index] => child.call(*index, budget),
            _ => child.batch(indices, budget),
        };
        self.cpus.beside_held();
        match called {
            Ok(elapsed) => Some(elapsed.as_nanos() as u64),
            Err(gone) => {
                self.lost(side, gone);
                None
            }
        }
    }

    /// How long `side`'s next call may take.
    fn budget(&self, side: Side) -> Duration {
        let CallBudget {
            first_ms,
            factor,
            floor_ms,
        } = self.request.budget;
        let times = &self.baseline_ns;
        if side == Side::Baseline || times.is_empty() {
            return Duration::from_millis(first_ms);
        }
        let median = times[times.len() / 2] as f64;
        Duration::from_nanos((factor * median) as u64).max(Duration::from_millis(floor_ms))
    }
}

/// One check of a batch.
#[derive(Debug)]
struct Batched<'r> {
    step: usize,
    call: usize,
    inputs: &'r [Option<PathBuf>],
    outputs: bool,
    digest: bool,
}

/// The `count` checks of the batch at step `step`, or why they cannot be
/// one: each a check of one call, their arrays apart (every call's inputs
/// are written before the first is made) and no workspace (which the
/// calls would share, unzeroed between them).
fn batched<'r>(
    calls: &[Vec<RunArg>],
    step: usize,
    checks: &'r [Step],
    count: u32,
) -> Result<Vec<Batched<'r>>, String> {
    if checks.len() != count as usize || !(1..=MAX_BATCH).contains(&count) {
        return Err(format!(
            "a batch of {count} checks, with {} steps after it (1 to {MAX_BATCH})",
            checks.len()
        ));
    }
    let mut used = std::collections::HashSet::new();
    let mut sets = Vec::with_capacity(checks.len());
    for (i, check) in checks.iter().enumerate() {
        let Step::Check {
            call,
            inputs,
            calls: 1,
            outputs,
            digest,
            ..
        } = check
        else {
            return Err(format!(
                "step {} of a batch is not a check of one call",
                i + 1
            ));
        };
        for arg in calls.get(*call).into_iter().flatten() {
            match arg {
                RunArg::Array { index, .. } if !used.insert(*index) => {
                    return Err(format!("the checks of a batch share the array {index}"));
                }
                RunArg::Workspace(bytes) if *bytes > 0 => {
                    return Err("a batch's calls have a workspace".into());
                }
                _ => {}
            }
        }
        sets.push(Batched {
            step: step + 1 + i,
            call: *call,
            inputs,
            outputs: *outputs,
            digest: *digest,
        });
    }
    Ok(sets)
}

/// A check's outputs, each as its own event.
fn send_outputs(channel: &mut File, step: usize, produced: &[(&String, &[u8])]) {
    for (array, bytes) in produced {
        let array = array.to_string();
        send(channel, &Event::Output { step, array }, bytes);
    }
}

/// Bytes of each piece of an output [`digest_of`] hashes on its own.
const DIGEST_PIECE: usize = 16 << 20;

/// A digest of a call's outputs, in hex: the SHA-256 of the SHA-256s of
/// each output's pieces of [`DIGEST_PIECE`] bytes, so that an output
/// beyond any cache is hashed on all of `every`, the run's CPUs
/// ([`spread`]); three digests of 1.6 GB each took 3 s of a grade on one.
/// Digests are only held against each other within a run.
fn digest_of<'b>(every: &[usize], outputs: impl Iterator<Item = &'b [u8]>) -> String {
    let mut hash = Sha256::new();
    for bytes in outputs {
        let cpus = spread::cpus_for(every, bytes.len());
        for piece in spread::map_pieces(cpus, bytes, DIGEST_PIECE, |p| Sha256::digest(p)) {
            hash.update(piece);
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Says how a runner was lost.
fn report_gone(channel: &mut File, side: Side, gone: Gone) {
    let event = match gone {
        Gone::Failed { stage, message } => Event::Failed {
            side,
            stage,
            message,
        },
        Gone::TimedOut => Event::Ended {
            side,
            code: None,
            signal: None,
            timed_out: true,
        },
        Gone::Ended { code, signal } => Event::Ended {
            side,
            code,
            signal,
            timed_out: false,
        },
    };
    send(channel, &event, &[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(call: usize) -> Step {
        Step::Check {
            label: format!("set {call}"),
            call,
            inputs: Vec::new(),
            calls: 1,
            outputs: true,
            digest: false,
        }
    }

    fn array(index: usize) -> RunArg {
        RunArg::Array {
            index,
            shape: vec![4],
        }
    }

    #[test]
    fn a_batch_is_checks_of_one_call_on_arrays_apart_without_a_workspace() {
        let calls = vec![
            vec![array(0), array(1), RunArg::Int(4), RunArg::Workspace(0)],
            vec![array(2), array(3), RunArg::Int(4), RunArg::Workspace(0)],
            vec![array(1), array(4)],
            vec![array(5), RunArg::Workspace(64)],
        ];
        let checks = [check(0), check(1)];
        let sets = batched(&calls, 7, &checks, 2).unwrap();
        let steps: Vec<usize> = sets.iter().map(|set| set.step).collect();
        assert_eq!(steps, [8, 9], "each check reports as its own step");
        let refused = |checks: &[Step], count| batched(&calls, 0, checks, count).unwrap_err();
        assert!(refused(&[check(0), check(2)], 2).contains("share the array 1"));
        assert!(refused(&[check(0), check(3)], 2).contains("workspace"));
        assert!(refused(&[check(0)], 2).contains("1 steps after it"));
        assert!(refused(&[], 0).contains("a batch of 0"));
        let repeated = Step::Check {
            label: "repeated".into(),
            call: 1,
            inputs: Vec::new(),
            calls: 3,
            outputs: true,
            digest: false,
        };
        assert!(refused(&[check(0), repeated], 2).contains("not a check of one call"));
        assert!(refused(&[check(0), Step::Floor { calls: 1 }], 2).contains("not a check"));
    }
}
