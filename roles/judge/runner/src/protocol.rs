//! What the judge asks of a run (JSON on the supervisor's stdin) and what the
//! supervisor reports back (frames on a pipe the judge opened for it).
//!
//! A frame is `u32 header length, JSON header, u64 payload length, payload`,
//! little-endian. The payload carries output bytes; everything else is in
//! the header. The supervisor is the judge's own code, outside every
//! runner's address space: nothing a submission does reaches this channel.
//! The same framing carries the runner's few reports to the supervisor
//! before the submission is loaded ([`Report`]); after that, the runner's
//! channel says only when a call has returned, and the supervisor decides
//! everything else itself.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use hpcagent_sandbox::landlock::Enforcement;
use hpcagent_sandbox::limits::Limits;
use serde::{Deserialize, Serialize};

use super::floor::Floor;
use crate::timing::StopRule;
use hpcagent_corpus::language::Language;
use hpcagent_corpus::{DType, Init, Role, Tolerance};

/// One run: a submission (and, when it is timed, the baseline beside it)
/// and the steps it goes through.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The submission's library.
    pub candidate: PathBuf,
    /// The baseline's library: present when the run has timed pairs.
    pub baseline: Option<PathBuf>,
    pub symbol: String,
    pub language: Language,
    /// Every array of the ABI, in argument order.
    pub arrays: Vec<ArraySpec>,
    /// The argument lists of the run's calls; steps name them by index.
    pub calls: Vec<Vec<RunArg>>,
    pub steps: Vec<Step>,
    /// The submission's directory: the only place it may write. The
    /// baseline gets a directory of its own inside it.
    pub sandbox: PathBuf,
    /// Directories a runner may read besides the system's (the shared mount).
    pub readable: Vec<PathBuf>,
    /// User (and group) id runners become (root judges).
    pub run_as: Option<u32>,
    /// Each runner's limits.
    pub limits: Limits,
    /// Runners get namespaces of their own; `false` only where the
    /// operator allowed weaker isolation.
    pub namespaces: bool,
    /// Runners are held by ptrace between calls; `false` only where the
    /// operator allowed weaker isolation (then by signals, which a runner
    /// can undo).
    pub trace: bool,
    /// The node's timing lock, which the supervisor opens itself and holds
    /// through the timed pairs.
    #[serde(default)]
    pub timing_lock: Option<PathBuf>,
    /// The GPU a device run is timed on: its pairs share the node's lock
    /// with other GPUs' and take this GPU's alone.
    #[serde(default)]
    pub timing_device: Option<u32>,
    /// How long a call may take.
    pub budget: CallBudget,
    /// PAPI events counted around the submission's calls (profile only).
    #[serde(default)]
    pub papi_events: Vec<String>,
    /// A profiled run's output directory: its runners share the
    /// supervisor's network namespace (loopback only, made for the run),
    /// may open Internet sockets there, and may write this directory.
    #[serde(default)]
    pub profile_output: Option<PathBuf>,
}

/// One array of the ABI.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArraySpec {
    pub name: String,
    pub dtype: DType,
    pub role: Role,
    /// How fresh inputs are drawn (timed pairs).
    pub init: Init,
}

/// One argument, in ABI order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RunArg {
    /// The `index`-th array of [`Request::arrays`], of this shape.
    Array {
        index: usize,
        shape: Vec<i64>,
    },
    Int(i64),
    F64(f64),
    F32(f32),
    /// C's `bool`, one byte.
    Bool(bool),
    /// The scratch pointer (NULL when 0 bytes); its size is the next `Int`.
    Workspace(u64),
}

impl RunArg {
    /// Elements of an array argument.
    pub fn elements(shape: &[i64]) -> usize {
        shape.iter().product::<i64>().max(0) as usize
    }
}

/// What the run does, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Step {
    /// The submission alone on known inputs (the public or a held-out
    /// case): `calls` calls of argument list `call`, each on fresh copies
    /// of `inputs` (one file per array, `None` for pure outputs). The last
    /// call's outputs are sent back when `outputs`, their digest when `digest`.
    Check {
        label: String,
        call: usize,
        inputs: Vec<Option<PathBuf>>,
        calls: u32,
        outputs: bool,
        digest: bool,
    },
    /// Timed pairs: the baseline and the submission on the same fresh
    /// inputs of argument list `call`, drawn from `seed` (a secret of this
    /// grade), in rounds of a pair in each order (which first, drawn from
    /// `seed`), until `stop` says so. The first pair
    /// warms both up and is not counted. Every pair's outputs are compared
    /// (within `tolerance.for_timed_calls()`); the first that differ end the step (not
    /// the run). With `sets` (a corpus whose inputs only its own generator
    /// makes), each pair runs on copies of the next set instead, the
    /// warm-up on the first: no pair sees inputs an earlier one saw, and
    /// the pairs end when the sets do.
    Pairs {
        call: usize,
        seed: [u8; 32],
        stop: StopRule,
        tolerance: Tolerance,
        #[serde(default)]
        sets: Vec<Vec<Option<PathBuf>>>,
    },
    /// The `checks` steps after this one, checks of one call each on
    /// argument lists whose arrays lie apart and that have no workspace,
    /// made in one continue of the submission's runner: their inputs are
    /// all written first, the runner makes the calls in order, and the lot
    /// is timed as one interval ([`Event::Batch`]), whose round trip is
    /// paid once instead of once a call. Each check's outputs are read
    /// and reported afterwards as its own. Every call's outputs held
    /// canaries when the batch began, so a call the runner did not make (a
    /// batch cut short) leaves outputs that are wrong.
    Batch { checks: u32 },
    /// `calls` empty calls on the baseline's runner: the runner's per-call
    /// floor ([`super::floor`]), for a run whose submission is timed
    /// against a reference timed inside its own process (no pairs: the
    /// baseline is then an empty kernel of the judge's, there for these
    /// steps alone), one beside each of its timed calls.
    Floor { calls: u32 },
    /// Profile: the submission on known inputs, as many calls as fit in
    /// `seconds` (between `fewest` and `most`).
    Profile {
        call: usize,
        inputs: Vec<Option<PathBuf>>,
        seconds: f64,
        fewest: u32,
        most: u32,
    },
}

/// How long one call may take: the first calls of a run, before the
/// baseline has been timed, get `first`; later ones `factor` times the
/// baseline's median so far, and at least `floor`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CallBudget {
    pub first_ms: u64,
    pub factor: f64,
    pub floor_ms: u64,
}

/// Which runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline = 0,
    Candidate = 1,
}

/// How isolated the runners were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// PID, mount, IPC and network namespaces of their own.
    pub namespaces: bool,
    pub landlock: Enforcement,
    pub seccomp: bool,
    /// Held between calls by ptrace-stops, which it cannot end.
    pub held: bool,
}

/// What the supervisor reports to the judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// What the run's arrays lie on, in a verdict's words (the buffers'
    /// own account of their backing).
    Buffers(String),
    /// The submission's runner is confined, as described.
    Isolated(Isolation),
    /// The submission's library loaded and the symbol resolved.
    Loaded,
    /// A runner could not be set up, or its library loaded: not an answer.
    Failed {
        side: Side,
        stage: String,
        message: String,
    },
    /// One of the submission's calls in a check or profile step.
    Call { step: usize, ns: u64 },
    /// A [`Step::Batch`]: its `calls` calls of the submission, timed as
    /// one interval of `ns` (the round trip's floor not taken off).
    Batch { step: usize, calls: u32, ns: u64 },
    /// The runner's per-call floor, measured on the baseline's runner
    /// after the warm-up pair ([`super::floor`]); sent before the first
    /// pair, whose times and every later pair's are net of it. Or of a
    /// [`Step::Floor`]: the submission's calls are as timed.
    Floor(Floor),
    /// One timed pair (not the warm-up): each call's time net of the floor.
    Pair { baseline_ns: u64, candidate_ns: u64 },
    /// A timed pair's outputs differ beyond a timed call's tolerance: the pairs
    /// end, the later steps still run.
    Mismatch { message: String },
    /// The submission changed an array it must only read.
    InputModified { step: usize, array: String },
    /// SHA-256 of every output after a check step's last call.
    OutputDigest { step: usize, digest: String },
    /// An output array's bytes after a check step's last call (payload).
    Output { step: usize, array: String },
    /// Hardware counters per call of a profile step (from the runner itself).
    Counters { values: BTreeMap<String, f64> },
    /// The device's own time of each of the submission's timed calls (the
    /// pairs', in order), as its runner measured it: advisory.
    DeviceTimes { ns: Vec<u64> },
    /// A runner ended before its calls did, or was killed at a call's deadline.
    Ended {
        side: Side,
        code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
    },
    /// Every step ran.
    Done,
}

impl Event {
    /// Whether the supervisor sends nothing after this (it ends the run's report).
    pub fn ends_run(&self) -> bool {
        matches!(
            self,
            Event::Done | Event::Failed { .. } | Event::Ended { .. } | Event::InputModified { .. }
        )
    }
}

/// What a runner reports to the supervisor before the submission is loaded,
/// and (counters) after its last call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Report {
    /// Where its buffers are (sent before anything untrusted runs).
    Buffers {
        address: u64,
    },
    Confined {
        landlock: Enforcement,
        seccomp: bool,
    },
    /// Loaded and resolved: the runner now waits for calls.
    Ready,
    Failed {
        stage: String,
        message: String,
    },
    Counters {
        values: BTreeMap<String, f64>,
    },
    /// On a device, each call's time there (events around the call on the
    /// default stream, transfers apart), in the order made. The runner's
    /// own measure, inside the submission's process: advisory.
    DeviceTimes {
        ns: Vec<u64>,
    },
}

/// What a runner is told at its start (JSON, then a newline, on its stdin;
/// calls follow as one `u32` each).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerSetup {
    pub library: PathBuf,
    pub symbol: String,
    pub language: Language,
    pub arrays: Vec<ArraySpec>,
    /// Byte offset and size of each array, then of the workspace, in the
    /// shared buffers.
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
    pub buffer_bytes: usize,
    pub calls: Vec<Vec<RunArg>>,
    pub sandbox: PathBuf,
    pub readable: Vec<PathBuf>,
    pub run_as: Option<u32>,
    pub papi_events: Vec<String>,
    /// See [`Request::profile_output`].
    pub profile_output: Option<PathBuf>,
}

/// Writes one frame. Its head (lengths and event) goes out in one write:
/// the reader wakes once per event instead of once per piece.
pub fn write_frame<T: Serialize>(
    out: &mut impl Write,
    event: &T,
    payload: &[u8],
) -> std::io::Result<()> {
    let header = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    let mut head = Vec::with_capacity(header.len() + 12);
    head.extend_from_slice(&(header.len() as u32).to_le_bytes());
    head.extend_from_slice(&header);
    head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.write_all(&head)?;
    out.write_all(payload)?;
    out.flush()
}

/// Largest header a reader accepts.
const MAX_HEADER: u32 = 1 << 20;

/// Reads one frame; `Ok(None)` at a clean end of stream. `payload_budget`
/// bounds what a frame may claim, so a corrupted channel cannot make the
/// reader allocate without limit.
pub fn read_frame<T: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
    payload_budget: u64,
) -> std::io::Result<Option<(T, Vec<u8>)>> {
    let mut payload = Vec::new();
    let frame = read_frame_into(input, payload_budget, &mut payload)?;
    Ok(frame.map(|event| (event, payload)))
}

/// As [`read_frame`], the payload into `payload` (its memory reused: a
/// payload of gigabytes allocated anew costs its page faults).
pub fn read_frame_into<T: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
    payload_budget: u64,
    payload: &mut Vec<u8>,
) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let header_len = u32::from_le_bytes(len);
    if header_len > MAX_HEADER {
        return Err(std::io::Error::other(format!(
            "frame header of {header_len} bytes"
        )));
    }
    let mut header = vec![0u8; header_len as usize];
    input.read_exact(&mut header)?;
    let event: T = serde_json::from_slice(&header).map_err(std::io::Error::other)?;
    let mut len = [0u8; 8];
    input.read_exact(&mut len)?;
    let payload_len = u64::from_le_bytes(len);
    if payload_len > payload_budget {
        return Err(std::io::Error::other(format!(
            "frame payload of {payload_len} bytes exceeds the outputs"
        )));
    }
    payload.clear();
    payload.reserve(payload_len as usize);
    // Into the spare capacity as it is: zeroing it first would cost a pass.
    let got = input.take(payload_len).read_to_end(payload)?;
    if got as u64 != payload_len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bound_payloads() {
        let mut buf = Vec::new();
        let pair = Event::Pair {
            baseline_ns: 3,
            candidate_ns: 1234,
        };
        write_frame(&mut buf, &pair, &[]).unwrap();
        let output = Event::Output {
            step: 0,
            array: "C".into(),
        };
        write_frame(&mut buf, &output, &[1, 2, 3]).unwrap();
        let mut r = buf.as_slice();
        assert_eq!(read_frame::<Event>(&mut r, 10).unwrap().unwrap().0, pair);
        assert_eq!(
            read_frame::<Event>(&mut r, 10).unwrap().unwrap().1,
            vec![1, 2, 3]
        );
        assert!(read_frame::<Event>(&mut r, 10).unwrap().is_none());
        let mut r = buf.as_slice();
        read_frame::<Event>(&mut r, 10).unwrap();
        assert!(
            read_frame::<Event>(&mut r, 2).is_err(),
            "a payload larger than the budget is refused"
        );
    }

    /// Counts the writes a frame takes (each is a wakeup of the reader).
    #[derive(Default)]
    struct Writes(Vec<usize>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_without_payload_is_one_write() {
        let mut out = Writes::default();
        write_frame(&mut out, &Event::Done, &[]).unwrap();
        assert_eq!(out.0.len(), 1, "{:?}", out.0);
        let output = Event::Output {
            step: 0,
            array: "C".into(),
        };
        write_frame(&mut out, &output, &[0; 100]).unwrap();
        assert_eq!(out.0.len(), 3, "the head, then the payload: {:?}", out.0);
    }
}
