//! Where binding cycles end: the plugin code after a Binding request (PostBind, a binder after Skip, Unreserve
//! after a failure) runs on a few long-lived threads fed by a queue.
//!
//! Why not the runtime's blocking pool: a hand-off there costs two wake-ups per pod (a pool thread, then an async
//! worker to resume the task that waits for it), more than a PostBind that logs a line. Here the async task hands
//! its cycle over and is done; a thread that finds more queued work runs it without sleeping in between. Plugin
//! code may block up to its deadline, so it never runs on an async worker (running it there once it had proved
//! quick measured no cheaper: docs/performance.md).

use std::sync::OnceLock;

use crossbeam_channel::{unbounded, Receiver, Sender};

/// One queued binding-cycle tail.
pub(super) type Tail = Box<dyn FnOnce() + Send + 'static>;

/// A fixed number of threads, started on first use, running queued tails in order of arrival.
pub(super) struct Tails {
    threads: usize,
    queue: OnceLock<Sender<Tail>>,
}

impl Tails {
    /// Tails run by `threads` threads (at least one) once the first is queued.
    pub(super) fn new(threads: usize) -> Tails {
        Tails { threads: threads.max(1), queue: OnceLock::new() }
    }

    /// Queues `tail` and returns at once. A tail that unwinds ends only itself (its caller accounts for what it
    /// left undone); the thread goes on with the next.
    pub(super) fn run(&self, tail: Tail) {
        let queue = self.queue.get_or_init(|| self.start());
        // The threads hold the receivers until the sender (this pool) is dropped, so the send cannot fail.
        queue.send(tail).expect("binding tail threads outlive their pool");
    }

    fn start(&self) -> Sender<Tail> {
        let (tx, rx) = unbounded::<Tail>();
        for i in 0..self.threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("binding-tail-{i}"))
                .spawn(move || drain(&rx))
                .expect("spawn a binding tail thread");
        }
        tx
    }
}

/// Runs tails until the pool's sender is dropped. Every idle thread waits on the queue itself (no lock in front
/// of it, which cost a second wake-up per tail), and a tail wakes one of them.
fn drain(rx: &Receiver<Tail>) {
    for tail in rx.iter() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(tail));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    #[test]
    fn tails_run_on_at_most_the_pool_s_threads_and_all_of_them_run() {
        let tails = Tails::new(3);
        let (running, most, done) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let names = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        for _ in 0..30 {
            let (running, most, done, names) = (running.clone(), most.clone(), done.clone(), names.clone());
            tails.run(Box::new(move || {
                most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                names.lock().unwrap().insert(std::thread::current().name().unwrap_or_default().to_string());
                std::thread::sleep(Duration::from_millis(5));
                running.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
            }));
        }
        let t0 = Instant::now();
        while done.load(Ordering::SeqCst) < 30 {
            assert!(t0.elapsed() < Duration::from_secs(20), "only {} of 30 tails ran", done.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(most.load(Ordering::SeqCst) <= 3, "{} at once", most.load(Ordering::SeqCst));
        assert!(most.load(Ordering::SeqCst) >= 2, "queued tails run side by side");
        let names = names.lock().unwrap();
        assert!(names.len() <= 3 && names.iter().all(|n| n.starts_with("binding-tail-")), "{names:?}");
    }
}
