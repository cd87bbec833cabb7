//! The scheduler's clock, in nanoseconds: wall time when live, a virtual clock in the simulator so backoffs cost
//! no real time and runs repeat.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The scheduler's clock, in nanoseconds. The simulator uses a virtual one so backoffs cost no real time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> u64;
}

/// Wall-clock time since the scheduler started.
#[derive(Debug)]
pub struct RealClock(Instant);

impl Default for RealClock {
    fn default() -> Self {
        RealClock(Instant::now())
    }
}

impl Clock for RealClock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct VirtualClock(AtomicU64);

impl VirtualClock {
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as u64, Ordering::SeqCst);
    }
    /// Moves the clock to `t` if that is later.
    pub fn advance_to(&self, t: u64) {
        self.0.fetch_max(t, Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
