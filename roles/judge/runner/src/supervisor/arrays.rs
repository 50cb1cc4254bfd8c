//! What a call's arrays hold, as the supervisor handles them in its own
//! mapping of the run's buffers: writing a call's inputs, canaries and a
//! zeroed workspace before it; reading its outputs after it; whether it
//! changed an input; comparing two answers; fresh inputs for timed pairs;
//! and inputs mapped from the judge's cache.

use std::borrow::Cow;
use std::ops::Deref;
use std::path::PathBuf;
use std::rc::Rc;

use super::{Run, fail, spread};
use rand_chacha::ChaCha8Rng;

use crate::buffers::{Layout, Mapping};
use crate::draw::{Draw, seeded_rng};
use crate::protocol::{Request, RunArg, Side};
use crate::verify::{self, Output, canary};
use hpcagent_corpus::{DType, Init, Role, Tolerance};

/// A call's input values by array index (`None` for pure outputs). A
/// check's come from the files it maps once per run and shares between
/// its steps; a pair's are drawn into memory of the pairs' own.
pub(super) type Values = [Option<Rc<Bytes>>];

/// One input array's values.
pub(super) enum Bytes {
    /// Drawn for a pair, into memory reused from pair to pair.
    Drawn(Vec<u8>),
    /// A file of the judge's cache, mapped: read into memory instead, an
    /// input of gigabytes (at L) cost its page faults and a copy before
    /// the copy into the buffers, in every check of a submit.
    Mapped(memmap2::Mmap),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Drawn(bytes) => bytes,
            Bytes::Mapped(map) => map,
        }
    }
}

impl Run<'_> {
    /// Writes a call's inputs, canaries and a zeroed workspace into the buffers.
    pub(super) fn load(&mut self, call: usize, values: &Values) {
        self.write(call, values, Written::All);
    }

    /// As [`Self::load`], but the read-only inputs left as they are: no
    /// call can change them (their regions are read-only in the runners),
    /// and rewriting them would cost a copy of every input per call.
    pub(super) fn reload(&mut self, call: usize, values: &Values) {
        self.write(call, values, Written::AllButReadOnly);
    }

    /// Writes a call's read-only inputs alone, for the calls [`Self::reload`]s.
    pub(super) fn place(&mut self, call: usize, values: &Values) {
        self.write(call, values, Written::ReadOnly);
    }

    fn write(&mut self, call: usize, values: &Values, written: Written) {
        let request = self.request;
        for arg in &request.calls[call] {
            match arg {
                RunArg::Array { index, shape } => {
                    let spec = &request.arrays[*index];
                    if !written.includes(spec.role == Role::In) {
                        continue;
                    }
                    let bytes = RunArg::elements(shape) * spec.dtype.size();
                    let at = self.layout.offsets[*index];
                    let cpus = spread::cpus_for(self.cpus.every(), bytes);
                    let region = self.buffers.bytes_mut(at, bytes);
                    match &values[*index] {
                        Some(input) => spread::zip_mut(cpus, region, input, |to, from| {
                            to.copy_from_slice(from)
                        }),
                        None => spread::each_mut(cpus, region, |to| canary::write(spec.dtype, to)),
                    }
                }
                RunArg::Workspace(bytes) if written != Written::ReadOnly => {
                    let at = *self.layout.offsets.last().expect("a workspace region");
                    self.buffers.bytes_mut(at, *bytes as usize).fill(0);
                }
                _ => {}
            }
        }
    }

    /// A copy of the output arrays after the last call into `into`,
    /// reusing its memory (an array of gigabytes allocated anew costs its
    /// page faults, seconds on some machines).
    pub(super) fn read_outputs(&self, call: usize, into: &mut Vec<Vec<u8>>) {
        let regions = self.output_regions(call);
        into.resize_with(regions.len(), Default::default);
        for (bytes, (_, region)) in into.iter_mut().zip(regions) {
            bytes.resize(region.len(), 0);
            let cpus = spread::cpus_for(self.cpus.every(), region.len());
            spread::zip_mut(cpus, bytes, region, |to, from| to.copy_from_slice(from));
        }
    }

    /// Each output array of the last call, (name, its bytes in the buffers).
    pub(super) fn output_regions(&self, call: usize) -> Vec<(&String, &[u8])> {
        output_regions(self.request, &self.layout, &self.buffers, call)
    }

    /// Where the submission's outputs (`theirs`) differ from the baseline's
    /// (`ours`) on the same inputs beyond `tolerance`, if they do.
    pub(super) fn compare(
        &self,
        call: usize,
        ours: &[&[u8]],
        theirs: &[&[u8]],
        tolerance: Tolerance,
    ) -> Option<String> {
        let shapes = self.request.calls[call].iter().filter_map(|arg| match arg {
            RunArg::Array { index, shape } if self.request.arrays[*index].role.is_output() => {
                Some((self.request.arrays[*index].dtype, shape))
            }
            _ => None,
        });
        let names = self.output_regions(call).into_iter().map(|(name, _)| name);
        for (((name, expected), actual), (dtype, shape)) in names.zip(ours).zip(theirs).zip(shapes)
        {
            // Most pairs' answers are the same bits: one pass says so.
            let cpus = spread::cpus_for(self.cpus.every(), actual.len());
            if spread::all(cpus, expected, actual, |o, t| same_and_written(dtype, o, t)) {
                continue;
            }
            let expected = widened(dtype, expected);
            let comparison = verify::compare(
                &Output {
                    name,
                    dtype,
                    shape,
                    actual,
                    expected: &expected,
                },
                tolerance,
            );
            if !comparison.correct {
                let why = comparison
                    .message
                    .unwrap_or_else(|| "a wrong result".into());
                return Some(format!(
                    "on a timed call with fresh inputs, against the baseline's answer: {why}"
                ));
            }
        }
        None
    }

    /// Fresh inputs of argument list `call` for pair `n`: every input
    /// array drawn anew from the grade's secret seed, as its kernel draws
    /// it; the read-only ones straight into the buffers (they stay as
    /// drawn through both calls), the others into `values` (reusing its
    /// memory), to be written before each call.
    pub(super) fn fresh(
        &mut self,
        call: usize,
        seed: &[u8; 32],
        n: u32,
        values: &mut Vec<Option<Rc<Bytes>>>,
    ) {
        values.resize(self.request.arrays.len(), None);
        for arg in &self.request.calls[call] {
            let RunArg::Array { index, shape } = arg else {
                continue;
            };
            let spec = &self.request.arrays[*index];
            if !spec.role.is_input() {
                continue;
            }
            let rng = seeded_rng(&[b"timed pair", seed, &n.to_le_bytes(), spec.name.as_bytes()]);
            let len = RunArg::elements(shape) * spec.dtype.size();
            // Beyond any core's caches, on the supervisor's CPUs too.
            let cpus = match len >= spread::DRAW_SPREAD_BYTES {
                true => self.cpus.every(),
                false => &self.request.limits.cpus,
            };
            if spec.role == Role::In {
                let region = self.buffers.bytes_mut(self.layout.offsets[*index], len);
                draw_on(cpus, spec.init, spec.dtype, rng, region);
                continue;
            }
            let shared = values[*index].get_or_insert_with(|| Rc::new(Bytes::Drawn(Vec::new())));
            // A step's pairs are drawn or read from sets, never both.
            let Some(Bytes::Drawn(bytes)) = Rc::get_mut(shared) else {
                unreachable!("a pair's drawn inputs are its own and drawn")
            };
            bytes.resize(len, 0);
            draw_on(cpus, spec.init, spec.dtype, rng, bytes);
        }
    }

    /// A check's inputs, from the judge's cache (each file mapped once).
    pub(super) fn read_inputs(
        &mut self,
        inputs: &[Option<PathBuf>],
    ) -> Option<Vec<Option<Rc<Bytes>>>> {
        let mut values = Vec::with_capacity(inputs.len());
        for path in inputs {
            let Some(path) = path else {
                values.push(None);
                continue;
            };
            if !self.files.contains_key(path) {
                let bytes = self.read_file(path)?;
                self.files.insert(path.clone(), bytes);
            }
            values.push(self.files.get(path).cloned());
        }
        Some(values)
    }

    /// As [`Self::read_inputs`], keeping nothing once the caller drops it
    /// (a pair's own input set, mapped for that pair alone).
    pub(super) fn read_set(
        &mut self,
        inputs: &[Option<PathBuf>],
    ) -> Option<Vec<Option<Rc<Bytes>>>> {
        inputs
            .iter()
            .map(|path| match path {
                Some(path) => self.read_file(path).map(Some),
                None => Some(None),
            })
            .collect()
    }

    /// One input file's bytes, mapped; `None` (and the run is over) when
    /// it cannot be.
    fn read_file(&mut self, path: &std::path::Path) -> Option<Rc<Bytes>> {
        match map_input(path) {
            Ok(bytes) => Some(Rc::new(bytes)),
            Err(e) => {
                self.over = true;
                let message = format!("{}: {e}", path.display());
                fail(self.channel, Side::Candidate, "inputs", message);
                None
            }
        }
    }
}

/// An input file of the judge's cache, mapped read-only with its pages
/// in place (an empty one has no mapping).
fn map_input(path: &std::path::Path) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::Drawn(Vec::new()));
    }
    // SAFETY: an input in the judge's private directory, which no runner
    // can open, written once through a rename and never changed in place;
    // a trim of the cache unlinks it, which leaves this mapping whole.
    unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map(Bytes::Mapped)
}

/// Whether `theirs` has the bits of `ours`, none of them a canary (an
/// element never written): right within any tolerance, told in one pass
/// over both. Floats of any other bits go through the tolerance.
fn same_and_written(dtype: DType, ours: &[u8], theirs: &[u8]) -> bool {
    if ours.len() != theirs.len() {
        return false;
    }
    match dtype {
        DType::F64 => same_words(ours, theirs, canary::F64.to_le_bytes()),
        DType::F32 => same_words(ours, theirs, canary::F32.to_le_bytes()),
        // An integer canary is a value a kernel may write, and complex
        // outputs have none.
        _ => ours == theirs,
    }
}

/// [`same_and_written`] for floats of `N` bytes whose canary is `canary`:
/// every word the same in both, and none of `theirs` the canary.
fn same_words<const N: usize>(ours: &[u8], theirs: &[u8], canary: [u8; N]) -> bool {
    let (ours, theirs) = (ours.chunks_exact(N), theirs.chunks_exact(N));
    ours.remainder().is_empty()
        && ours
            .zip(theirs)
            .fold(true, |same, (o, t)| same & (o == t) & (t != canary))
}

/// [`Run::output_regions`] from the run's parts, so that a caller may
/// send them down the run's channel while it holds them.
pub(super) fn output_regions<'r>(
    request: &'r Request,
    layout: &Layout,
    buffers: &'r Mapping,
    call: usize,
) -> Vec<(&'r String, &'r [u8])> {
    request.calls[call]
        .iter()
        .filter_map(|arg| match arg {
            RunArg::Array { index, shape } => Some((*index, shape)),
            _ => None,
        })
        .filter(|(index, _)| request.arrays[*index].role.is_output())
        .map(|(index, shape)| {
            let spec = &request.arrays[index];
            let bytes = RunArg::elements(shape) * spec.dtype.size();
            (&spec.name, buffers.bytes(layout.offsets[index], bytes))
        })
        .collect()
}

/// Draws `out` from `rng` as one [`Draw`] would, in pieces on each of
/// `cpus` (idle between calls) when it is large: a pair of a
/// kernel with large inputs otherwise spends longer drawing them than
/// calling it.
fn draw_on(cpus: &[usize], init: Init, dtype: DType, rng: ChaCha8Rng, out: &mut [u8]) {
    // Below this a piece costs more in starting its thread than it saves.
    // Which CPUs an input of a size may be drawn on: [`fresh`].
    const PIECE: usize = 4 << 20;
    let size = dtype.size();
    let pieces = cpus.len().min(out.len() / PIECE).max(1);
    if pieces == 1 {
        return Draw::new(init, dtype, rng).fill(out);
    }
    // Whole elements, an even number of them (normal values come in pairs).
    let elements = (out.len() / size).div_ceil(pieces).next_multiple_of(2);
    let pieces = out.chunks_mut(elements * size).enumerate();
    spread::on_cpus(cpus, pieces, |(k, piece)| {
        Draw::from_element(init, dtype, rng.clone(), (k * elements) as u64).fill(piece)
    });
}

/// Which of a call's arrays [`Run::write`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    All,
    /// The outputs' canaries, the arrays read and written, the workspace.
    AllButReadOnly,
    /// The inputs a kernel only reads.
    ReadOnly,
}

impl Written {
    fn includes(self, read_only: bool) -> bool {
        match self {
            Written::All => true,
            Written::AllButReadOnly => !read_only,
            Written::ReadOnly => read_only,
        }
    }
}

/// Bytes each region needs: every array as large as its largest use, then
/// the workspace.
pub(super) fn region_sizes(request: &Request) -> Vec<usize> {
    let mut sizes = vec![0usize; request.arrays.len() + 1];
    for arg in request.calls.iter().flatten() {
        match arg {
            RunArg::Array { index, shape } => {
                let bytes = RunArg::elements(shape) * request.arrays[*index].dtype.size();
                sizes[*index] = sizes[*index].max(bytes);
            }
            RunArg::Workspace(bytes) => {
                let last = sizes.len() - 1;
                sizes[last] = sizes[last].max(*bytes as usize);
            }
            _ => {}
        }
    }
    sizes
}

/// Output bytes as a reference holds them: floats as float64.
pub(super) fn widened(dtype: DType, bytes: &[u8]) -> Cow<'_, [u8]> {
    match dtype {
        DType::F32 => Cow::Owned(
            bytes
                .chunks_exact(4)
                .flat_map(|e| {
                    (f32::from_le_bytes(e.try_into().expect("4 bytes")) as f64).to_le_bytes()
                })
                .collect(),
        ),
        _ => Cow::Borrowed(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::seeded_rng;

    #[test]
    fn inputs_drawn_in_pieces_on_several_cpus_are_those_drawn_at_once() {
        // Three pieces of more than 4 MiB, and an odd number of elements.
        let elements = 3 * (4 << 20) / 8 + 1001;
        for init in [Init::Uniform, Init::Normal] {
            let rng = || seeded_rng(&[b"pieces", format!("{init:?}").as_bytes()]);
            let mut at_once = vec![0u8; elements * 8];
            Draw::new(init, DType::F64, rng()).fill(&mut at_once);
            let mut in_pieces = vec![0u8; elements * 8];
            // CPU 0 three times: any machine has it.
            draw_on(&[0, 0, 0], init, DType::F64, rng(), &mut in_pieces);
            assert!(in_pieces == at_once, "{init:?}");
        }
    }
}
