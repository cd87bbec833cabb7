//! Guest deadlines in wall-clock time: the engine's epoch counts milliseconds, advanced by one thread that wakes
//! at a period fitted to the shortest deadline in use and sleeps for good while no call can be running.
//!
//! An epoch is one millisecond whatever the period, so the period can change at any time without moving a
//! deadline already set: a longer period only makes the interruption later (by at most the period), never
//! earlier. Each wake-up adds the milliseconds that really passed, so a ticker the machine kept waiting does not
//! stretch deadlines either.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use wasmtime::Engine;

/// What one epoch stands for.
const EPOCH: Duration = Duration::from_millis(1);
/// The finest and the coarsest period: a wake-up every millisecond at most, and an interruption at most 10 ms
/// late.
const MIN_PERIOD: Duration = Duration::from_millis(1);
const MAX_PERIOD: Duration = Duration::from_millis(10);
/// The period is this fraction of the shortest deadline in use: a call is interrupted at most 5% late.
const PERIOD_DIVISOR: u64 = 20;

/// The period for the shortest deadline in use (milliseconds; `u64::MAX` when none yet).
fn period_for(shortest_ms: u64) -> Duration {
    Duration::from_millis(shortest_ms / PERIOD_DIVISOR).clamp(MIN_PERIOD, MAX_PERIOD)
}

/// The epoch clock of one engine.
#[derive(Debug)]
pub struct Ticker {
    /// Epochs added so far (the engine's epoch, as only this ticker advances it).
    epochs: AtomicU64,
    /// `epochs` when the latest call began.
    last_start: AtomicU64,
    /// The longest deadline requested so far, in epochs.
    longest: AtomicU64,
    /// The shortest deadline requested so far, in milliseconds.
    shortest_ms: AtomicU64,
    /// Set while the thread sleeps until the next call.
    parked: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Default for Ticker {
    fn default() -> Self {
        Ticker {
            epochs: AtomicU64::new(0),
            last_start: AtomicU64::new(0),
            longest: AtomicU64::new(0),
            shortest_ms: AtomicU64::new(u64::MAX),
            // Nothing runs before the first call.
            parked: AtomicBool::new(true),
            thread: OnceLock::new(),
        }
    }
}

impl Ticker {
    /// Starts the thread that advances `engine`'s epoch; it sleeps until the first call.
    pub fn start(self: &Arc<Self>, engine: Engine, name: &str) -> std::io::Result<()> {
        let me = self.clone();
        let handle = std::thread::Builder::new().name(name.into()).spawn(move || me.run(&engine))?;
        self.thread.set(handle.thread().clone()).expect("a ticker is started once");
        Ok(())
    }

    /// Epochs for a call's deadline (`deadline` in whole milliseconds, plus one, so that a call never gets less),
    /// to pass to `set_epoch_deadline` as the call begins: it also wakes the thread if it slept.
    pub fn deadline(&self, deadline: Duration) -> u64 {
        let ms = deadline.as_millis().min(u64::MAX as u128 - 1) as u64;
        let epochs = ms / EPOCH.as_millis() as u64 + 1;
        if ms < self.shortest_ms.load(Ordering::Relaxed) {
            self.shortest_ms.fetch_min(ms, Ordering::Relaxed);
        }
        if epochs > self.longest.load(Ordering::Relaxed) {
            self.longest.fetch_max(epochs, Ordering::Relaxed);
        }
        // With the thread's store to `parked` and load of `last_start` (all SeqCst), either this call sees it
        // parked and wakes it, or it sees this call and does not park.
        self.last_start.fetch_max(self.epochs.load(Ordering::Relaxed), Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) && self.parked.swap(false, Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
        epochs
    }

    /// Whether the thread sleeps until the next call.
    #[cfg(test)]
    fn is_parked(&self) -> bool {
        self.parked.load(Ordering::SeqCst)
    }

    /// The thread: adds the milliseconds passed at every period; parks once every call begun has passed its
    /// deadline (so none can still be running un-interrupted).
    fn run(&self, engine: &Engine) {
        loop {
            while self.parked.load(Ordering::SeqCst) {
                std::thread::park();
            }
            // Time asleep is not counted: no call ran then, and a call that began as the thread woke has its
            // deadline from the epoch it saw.
            let (since, base) = (Instant::now(), self.epochs.load(Ordering::Relaxed));
            loop {
                std::thread::sleep(period_for(self.shortest_ms.load(Ordering::Relaxed)));
                let due = base + (since.elapsed().as_millis() / EPOCH.as_millis()) as u64;
                let mut now = self.epochs.load(Ordering::Relaxed);
                while now < due {
                    engine.increment_epoch();
                    now += 1;
                }
                self.epochs.store(now, Ordering::Relaxed);
                if now.saturating_sub(self.last_start.load(Ordering::SeqCst)) <= self.longest.load(Ordering::Relaxed) {
                    continue;
                }
                self.parked.store(true, Ordering::SeqCst);
                if now.saturating_sub(self.last_start.load(Ordering::SeqCst)) > self.longest.load(Ordering::Relaxed) {
                    break;
                }
                // A call began meanwhile: keep ticking (unless it already cleared the flag and unparked us).
                self.parked.store(false, Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::{Config, Module, Store, Trap};

    use super::*;

    #[test]
    fn the_period_is_a_twentieth_of_the_shortest_deadline_between_1_and_10_ms() {
        assert_eq!(period_for(u64::MAX), MAX_PERIOD);
        assert_eq!(period_for(100), Duration::from_millis(5));
        assert_eq!(period_for(10), MIN_PERIOD);
        assert_eq!(period_for(0), MIN_PERIOD);
        assert_eq!(period_for(60_000), MAX_PERIOD);
    }

    fn engine() -> Engine {
        let mut config = Config::new();
        config.epoch_interruption(true);
        Engine::new(&config).unwrap()
    }

    /// Runs a guest that never returns under a `deadline` in a thread; answers its trap, or None if it was still
    /// running after 20 s.
    fn run_loop(engine: &Engine, ticker: &Arc<Ticker>, deadline: Duration) -> Option<Trap> {
        let module = Module::new(engine, r#"(module (func (export "spin") (loop (br 0))))"#).unwrap();
        let (engine, ticker) = (engine.clone(), ticker.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut store = Store::new(&engine, ());
            store.set_epoch_deadline(ticker.deadline(deadline));
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
            let spin = instance.get_typed_func::<(), ()>(&mut store, "spin").unwrap();
            let e = spin.call(&mut store, ()).unwrap_err();
            let _ = tx.send(e.downcast::<Trap>().unwrap());
        });
        rx.recv_timeout(Duration::from_secs(20)).ok()
    }

    fn wait_parked(ticker: &Ticker) {
        let t0 = Instant::now();
        while !ticker.is_parked() {
            assert!(t0.elapsed() < Duration::from_secs(20), "the ticker never parked");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_runaway_guest_is_interrupted_after_the_ticker_slept_and_the_ticker_sleeps_again_after_it() {
        let engine = engine();
        let ticker = Arc::new(Ticker::default());
        ticker.start(engine.clone(), "test-epoch").unwrap();
        assert!(ticker.is_parked(), "no call yet: nothing to tick for");
        assert_eq!(run_loop(&engine, &ticker, Duration::from_millis(30)), Some(Trap::Interrupt));
        // Past the longest deadline with no call, it sleeps; the next call wakes it and is interrupted too.
        wait_parked(&ticker);
        assert_eq!(run_loop(&engine, &ticker, Duration::from_millis(30)), Some(Trap::Interrupt));
        wait_parked(&ticker);
    }

    #[test]
    fn a_call_is_not_interrupted_before_its_deadline_even_right_after_a_wake_up() {
        let engine = engine();
        let ticker = Arc::new(Ticker::default());
        ticker.start(engine.clone(), "test-epoch").unwrap();
        for _ in 0..3 {
            wait_parked(&ticker);
            // Longer asleep than the deadline: were that time counted, the call would be interrupted at once.
            std::thread::sleep(Duration::from_millis(300));
            let t0 = Instant::now();
            assert_eq!(run_loop(&engine, &ticker, Duration::from_millis(200)), Some(Trap::Interrupt));
            assert!(t0.elapsed() >= Duration::from_millis(200), "interrupted after {:?}", t0.elapsed());
        }
    }
}
