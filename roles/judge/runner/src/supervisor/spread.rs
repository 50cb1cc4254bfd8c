//! The supervisor's work on an array too large for any cache, shared
//! between every CPU the run may use while its runners are held (theirs and
//! the supervisor's own): drawing it, writing it or its canaries before a
//! call, copying, comparing and hashing its outputs after one.
//!
//! A smaller array's work stays where it is (on the runner's CPU, for the
//! caches: [`super::cpus`]), or on the runners' CPUs for a draw. Beyond
//! [`SPREAD_BYTES`] the calls read and write the array in memory whichever
//! core touched it last, so a piece done on another core costs them
//! nothing; done on one core, conv-2d at L (two arrays of 1.6 GB) spent a
//! third of its grade drawing and copying between calls, and a pair's
//! overhead took as long as its calls.

/// Bytes from which an array's work is shared between the CPUs.
pub(super) const SPREAD_BYTES: usize = 256 << 20;

/// Bytes from which a pair's input is drawn on every CPU of the run, not
/// only the runners'. Drawing is the one piece of work done before the
/// pair's first call alone; at this size the array is far beyond any
/// core's own caches (1-2 MiB of L2 on the nodes graded on), so the first
/// call finds it where it would have anyway (in memory, or in a cache the
/// cores share), and the order of a pair's calls is drawn, so neither side
/// gains. Drawn on the runners' CPU alone, s242 at L (four arrays of 80
/// MiB, a 41 ms call) spent longer drawing a pair than in its two calls.
/// Below it, drawn on the supervisor's CPU too, inputs of 1-4 MiB came to
/// the calls from two cores' caches and identical code measured 0.78-1.09x.
pub(super) const DRAW_SPREAD_BYTES: usize = 64 << 20;

/// The CPUs an array of `bytes` is worked on: `every` for one of
/// [`SPREAD_BYTES`] or more, else none (the calling thread alone).
pub(super) fn cpus_for(every: &[usize], bytes: usize) -> &[usize] {
    match bytes >= SPREAD_BYTES {
        true => every,
        false => &[],
    }
}

/// `work` on matching pieces of `dst` and `src` (of one length), one piece
/// on each of `cpus` (none or one: all of it on the calling thread).
pub(super) fn zip_mut(
    cpus: &[usize],
    dst: &mut [u8],
    src: &[u8],
    work: impl Fn(&mut [u8], &[u8]) + Sync,
) {
    let piece = piece(cpus, dst.len());
    let pieces = dst.chunks_mut(piece).zip(src.chunks(piece));
    on_cpus(cpus, pieces, |(dst, src)| work(dst, src));
}

/// `work` on pieces of `dst`, one on each of `cpus`, as [`zip_mut`].
pub(super) fn each_mut(cpus: &[usize], dst: &mut [u8], work: impl Fn(&mut [u8]) + Sync) {
    let piece = piece(cpus, dst.len());
    on_cpus(cpus, dst.chunks_mut(piece), work);
}

/// Whether `test` holds for every pair of matching pieces of `a` and `b`
/// (of one length), a piece on each of `cpus`, as [`zip_mut`].
pub(super) fn all(
    cpus: &[usize],
    a: &[u8],
    b: &[u8],
    test: impl Fn(&[u8], &[u8]) -> bool + Sync,
) -> bool {
    if a.len() != b.len() {
        return test(a, b);
    }
    let piece = piece(cpus, a.len());
    let pieces = a.chunks(piece).zip(b.chunks(piece));
    on_cpus(cpus, pieces, |(a, b)| test(a, b))
        .into_iter()
        .all(|same| same)
}

/// `each` of the pieces of `piece` bytes of `bytes`, in order, the pieces
/// dealt out to `cpus` in turn (all on the calling thread for none or one).
pub(super) fn map_pieces<T: Send>(
    cpus: &[usize],
    bytes: &[u8],
    piece: usize,
    each: impl Fn(&[u8]) -> T + Sync,
) -> Vec<T> {
    let pieces: Vec<&[u8]> = bytes.chunks(piece.max(1)).collect();
    let turns = cpus.len().max(1);
    let dealt = on_cpus(cpus, 0..turns, |k| {
        (pieces.iter().enumerate().skip(k).step_by(turns))
            .map(|(i, piece)| (i, each(piece)))
            .collect::<Vec<_>>()
    });
    let mut done: Vec<(usize, T)> = dealt.into_iter().flatten().collect();
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, value)| value).collect()
}

/// `work` on each of `pieces`, in order: the first on the first of `cpus`,
/// and so on (round again where there are more pieces than CPUs), each on
/// a thread kept on its CPU; on the calling thread where `cpus` has fewer
/// than two.
pub(super) fn on_cpus<P: Send, T: Send>(
    cpus: &[usize],
    pieces: impl Iterator<Item = P>,
    work: impl Fn(P) -> T + Sync,
) -> Vec<T> {
    if cpus.len() < 2 {
        return pieces.map(work).collect();
    }
    let work = &work;
    std::thread::scope(|scope| {
        let threads: Vec<_> = (pieces.zip(cpus.iter().cycle()))
            .map(|(piece, &cpu)| {
                scope.spawn(move || {
                    pin_this_thread(cpu);
                    work(piece)
                })
            })
            .collect();
        (threads.into_iter())
            .map(|thread| thread.join().expect("a piece's thread"))
            .collect()
    })
}

/// Bytes of each piece of `len` shared between `cpus`: whole cache lines,
/// so that every piece starts on an element of any type.
fn piece(cpus: &[usize], len: usize) -> usize {
    len.div_ceil(cpus.len().max(1)).next_multiple_of(64).max(64)
}

/// Keeps the calling thread on `cpu`.
fn pin_this_thread(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET bounds-checks.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the set it is given, in bounds.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a stack value of the size passed; 0 is this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_pieces_covers_every_byte_once_and_tells_any_difference() {
        // CPU 0 three times: any machine has it. An odd length, and one
        // under a cache line a piece.
        for len in [3 * 64 * 1000 + 17, 100, 0] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            zip_mut(&[0, 0, 0], &mut dst, &src, |d, s| d.copy_from_slice(s));
            assert!(dst == src, "{len}");
            let mut filled = vec![0u8; len];
            each_mut(&[0, 0, 0], &mut filled, |d| {
                d.iter_mut().for_each(|b| *b += 1)
            });
            assert!(filled.iter().all(|&b| b == 1), "{len}: each byte once");
            let same = |a: &[u8], b: &[u8]| a == b;
            assert!(all(&[0, 0, 0], &dst, &src, same));
            if len > 0 {
                dst[len - 1] ^= 1;
                assert!(!all(&[0, 0, 0], &dst, &src, same), "{len}: the last piece");
                dst[len - 1] ^= 1;
                dst[0] ^= 1;
                assert!(!all(&[0, 0, 0], &dst, &src, same), "{len}: the first piece");
            }
        }
    }

    #[test]
    fn pieces_mapped_on_several_cpus_come_back_in_order() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 256) as u8).collect();
        let firsts = |cpus: &[usize]| map_pieces(cpus, &bytes, 64, |p| (p[0], p.len()));
        let alone = firsts(&[]);
        assert_eq!(alone.len(), 16);
        assert_eq!(alone[15], (192, 1000 - 15 * 64));
        assert_eq!(firsts(&[0, 0, 0]), alone);
        assert!(map_pieces(&[0, 0], &[], 64, |p| p.len()).is_empty());
        // More pieces than CPUs: none is left out.
        assert_eq!(on_cpus(&[0, 0], 0..5, |i| i * 10), vec![0, 10, 20, 30, 40]);
    }

    #[test]
    fn only_an_array_beyond_any_cache_is_shared() {
        assert_eq!(cpus_for(&[1, 0], SPREAD_BYTES - 1), &[] as &[usize]);
        assert_eq!(cpus_for(&[1, 0], SPREAD_BYTES), &[1, 0]);
        const { assert!(DRAW_SPREAD_BYTES < SPREAD_BYTES) };
    }
}
