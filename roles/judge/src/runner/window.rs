//! The window between a call's return and the copy of its outputs, and
//! whether the runner kept its CPU through it.
//!
//! A kernel can return at once and leave a thread computing its answer. The
//! runner copies the outputs the moment the call returns, so that work does
//! not count; but if the runner loses its CPU in that window (a loaded node,
//! or a kernel that makes its thread outrank the runner on the runner's CPU),
//! the thread may finish the answer before the copy. The runner then takes
//! the copy as unreliable and calls the kernel again. It knows it lost its
//! CPU when the window's wall time exceeds its own CPU time in the window:
//! the kernel's threads cannot add to the runner thread's CPU clock.
//!
//! Time off the CPU is allowed up to the time the runner spent in the window
//! (plus [`GRACE`]): a thread on another core computes while the runner
//! copies anyway, so a large output's long copy gains nothing from a
//! stricter bound, and is not retried over every scheduler tick it spans.

use std::time::{Duration, Instant};

/// Time off the CPU a window may have and still count as held: interrupts
/// and the clocks' reading take a few microseconds; a thread given the CPU
/// gets a scheduler slice, milliseconds.
const GRACE: Duration = Duration::from_micros(50);

/// A window opened at a call's return.
pub struct Window {
    /// When the call's timer stopped.
    returned: Instant,
    /// The runner thread's CPU clock just after that.
    cpu: Duration,
}

impl Window {
    /// Opens the window of a call whose timer stopped at `returned`.
    pub fn open(returned: Instant) -> Window {
        Window {
            returned,
            cpu: thread_cpu(),
        }
    }

    /// The runner's time since the call returned: (on its CPU, off it).
    pub fn times(&self) -> (Duration, Duration) {
        let on = thread_cpu().saturating_sub(self.cpu);
        (on, self.returned.elapsed().saturating_sub(on))
    }

    /// Whether the runner kept its CPU from the call's return until now, to
    /// within what the window allows.
    pub fn held(&self) -> bool {
        let (on, off) = self.times();
        off <= GRACE + on
    }
}

/// The calling thread's CPU time (user and system).
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a plain clock read into a stack value; this clock exists on
    // every Linux the runner supports.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_the_runner_computed_through_is_held() {
        // A busy machine may take the CPU even from a spinning thread; a
        // window held once in a few tries is what the runner relies on.
        let mut off = Vec::new();
        let held = (0..5).any(|_| {
            let window = Window::open(Instant::now());
            let spin = Instant::now();
            let mut x = 0u64;
            while spin.elapsed() < Duration::from_micros(500) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            off.push(window.times().1);
            window.held()
        });
        assert!(held, "off the CPU in every try: {off:?}");
    }

    #[test]
    fn a_window_the_runner_slept_through_is_not_held() {
        let window = Window::open(Instant::now());
        std::thread::sleep(Duration::from_millis(2));
        let (on, off) = window.times();
        assert!(
            off >= Duration::from_millis(2) - on,
            "on {on:?}, off {off:?}"
        );
        assert!(!window.held());
    }

    #[test]
    fn time_before_the_window_opened_counts_as_off_the_cpu() {
        // The timer stopped, then the runner was preempted before it read
        // its CPU clock: that gap is in the window too.
        let returned = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(!Window::open(returned).held());
    }
}
