//! What the judge tells the runner (JSON on its stdin) and what the runner
//! reports back (frames on a pipe the judge opened for it).
//!
//! A frame is `u32 header length, JSON header, u64 payload length, payload`,
//! little-endian. The payload carries output bytes; everything else is in the
//! header. The judge trusts nothing in the frames beyond their shape: it
//! verifies outputs itself and bounds every size.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::corpus::{DType, Role};
use crate::language::Language;
use crate::sandbox::confine::Enforcement;

/// One run of a submission over one or more cases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub library: PathBuf,
    pub symbol: String,
    pub language: Language,
    pub cases: Vec<RunCase>,
    /// The run's own directory: the only place it may write.
    pub sandbox: PathBuf,
    /// Directories the run may read besides the system's (the shared mount).
    pub readable: Vec<PathBuf>,
    /// User (and group) id to become before loading the submission, when the
    /// judge runs as root.
    pub run_as: Option<u32>,
    /// PAPI events to count around each timed call (profile only).
    #[serde(default)]
    pub papi_events: Vec<String>,
}

/// One set of arguments, called `warmup + reps` times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunCase {
    pub label: String,
    pub args: Vec<RunArg>,
    pub warmup: u32,
    pub reps: u32,
    /// Send the outputs of the last call back for verification.
    pub send_outputs: bool,
    /// Report output digests of the first call and the last two on the same
    /// inputs (determinism).
    pub digests: bool,
}

/// One argument, in ABI order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RunArg {
    Array {
        name: String,
        dtype: DType,
        role: Role,
        elements: usize,
        /// Raw little-endian input, for `in` and `inout` arrays.
        input: Option<PathBuf>,
        /// Other values of the same kind, for every call but the last: a
        /// result cached from an earlier call is stale on the verified one.
        #[serde(default)]
        earlier: Option<PathBuf>,
    },
    Int(i64),
    F64(f64),
    F32(f32),
    /// The scratch pointer (NULL when 0 bytes); its size is the next `Int`.
    Workspace(u64),
}

/// What the runner reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// Confinement applied: how much the kernel enforced, and whether the
    /// process has no network.
    Confined {
        enforcement: Enforcement,
        network_isolated: bool,
    },
    /// The library loaded and the symbol resolved.
    Loaded,
    /// One call's duration.
    Rep {
        case: usize,
        rep: u32,
        ns: u64,
        warmup: bool,
    },
    /// The kernel changed an array it must only read.
    InputModified {
        case: usize,
        array: String,
    },
    /// SHA-256 of every output after a call (for the determinism check).
    OutputDigest {
        case: usize,
        rep: u32,
        digest: String,
    },
    /// An output array's bytes after the last call (payload).
    Output {
        case: usize,
        array: String,
    },
    /// Hardware counters of the timed calls (profile).
    Counters {
        case: usize,
        values: BTreeMap<String, f64>,
    },
    /// The run cannot proceed (library, symbol, device): not the kernel's answer.
    Failed {
        stage: String,
        message: String,
    },
    Done,
    /// From the supervisor: how the runner process ended (after everything it
    /// left behind was killed).
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Writes one frame. Its head (lengths and event) goes out in one write:
/// the judge reads the channel as the run goes, and wakes once per event
/// instead of once per piece (a run sends an event per call).
pub fn write_frame(out: &mut impl Write, event: &Event, payload: &[u8]) -> std::io::Result<()> {
    let header = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    let mut head = Vec::with_capacity(header.len() + 12);
    head.extend_from_slice(&(header.len() as u32).to_le_bytes());
    head.extend_from_slice(&header);
    head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.write_all(&head)?;
    out.write_all(payload)?;
    out.flush()
}

/// Largest header the judge accepts.
const MAX_HEADER: u32 = 1 << 20;

/// Reads one frame; `Ok(None)` at a clean end of stream. `payload_budget`
/// bounds what a frame may claim, so a corrupted channel cannot make the
/// judge allocate without limit.
pub fn read_frame(
    input: &mut impl Read,
    payload_budget: u64,
) -> std::io::Result<Option<(Event, Vec<u8>)>> {
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
    let event: Event = serde_json::from_slice(&header).map_err(std::io::Error::other)?;
    let mut len = [0u8; 8];
    input.read_exact(&mut len)?;
    let payload_len = u64::from_le_bytes(len);
    if payload_len > payload_budget {
        return Err(std::io::Error::other(format!(
            "frame payload of {payload_len} bytes exceeds the outputs"
        )));
    }
    let mut payload = vec![0u8; payload_len as usize];
    input.read_exact(&mut payload)?;
    Ok(Some((event, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bound_payloads() {
        let mut buf = Vec::new();
        write_frame(
            &mut buf,
            &Event::Rep {
                case: 0,
                rep: 3,
                ns: 1234,
                warmup: false,
            },
            &[],
        )
        .unwrap();
        write_frame(
            &mut buf,
            &Event::Output {
                case: 0,
                array: "C".into(),
            },
            &[1, 2, 3],
        )
        .unwrap();
        let mut r = buf.as_slice();
        assert_eq!(
            read_frame(&mut r, 10).unwrap().unwrap().0,
            Event::Rep {
                case: 0,
                rep: 3,
                ns: 1234,
                warmup: false
            }
        );
        assert_eq!(read_frame(&mut r, 10).unwrap().unwrap().1, vec![1, 2, 3]);
        assert!(read_frame(&mut r, 10).unwrap().is_none());
        let mut r = buf.as_slice();
        read_frame(&mut r, 10).unwrap();
        assert!(
            read_frame(&mut r, 2).is_err(),
            "a payload larger than the budget is refused"
        );
    }

    /// Counts the writes a frame takes (each is a wakeup of the judge).
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
            case: 0,
            array: "C".into(),
        };
        write_frame(&mut out, &output, &[0; 100]).unwrap();
        assert_eq!(out.0.len(), 3, "the head, then the payload: {:?}", out.0);
    }
}
