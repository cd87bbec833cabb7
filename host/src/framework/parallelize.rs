//! The one place that runs work in parallel: a thread pool sized by the profile's `parallelism` (capped by the
//! machine), and chunked maps over node lists.

use std::sync::Arc;

use rayon::prelude::*;

/// Below this many items per chunk, splitting costs more than it saves.
const MIN_CHUNK: usize = 16;

/// A shared pool for Filter and Score.
#[derive(Clone)]
pub struct Parallelizer {
    pool: Arc<rayon::ThreadPool>,
    threads: usize,
}

impl std::fmt::Debug for Parallelizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parallelizer").field("threads", &self.threads).finish()
    }
}

impl Parallelizer {
    /// A pool of `min(parallelism, available cores)` threads.
    pub fn new(parallelism: usize) -> Parallelizer {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let threads = parallelism.clamp(1, cores.max(1));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("sched-worker-{i}"))
            .build()
            .expect("thread pool");
        Parallelizer { pool: Arc::new(pool), threads }
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Splits `items` into one chunk per worker (at least `MIN_CHUNK` long), maps each chunk with `f`, and
    /// returns the results in chunk order. Small inputs run on the calling thread.
    pub fn map_chunks<T: Sync, R: Send>(&self, items: &[T], f: impl Fn(usize, &[T]) -> R + Sync) -> Vec<R> {
        if items.is_empty() {
            return Vec::new();
        }
        let chunk = items.len().div_ceil(self.threads).max(MIN_CHUNK);
        if chunk >= items.len() || self.threads == 1 {
            return vec![f(0, items)];
        }
        self.pool.install(|| {
            items.par_chunks(chunk).enumerate().map(|(i, c)| f(i * chunk, c)).collect()
        })
    }

    /// Runs `f` on mutable chunks of `items` in parallel (offset of each chunk given).
    pub fn for_each_chunk_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
        let len = items.len();
        if len == 0 {
            return;
        }
        let chunk = len.div_ceil(self.threads).max(MIN_CHUNK);
        if chunk >= len || self.threads == 1 {
            f(0, items);
            return;
        }
        self.pool.install(|| items.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i * chunk, c)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_everything_in_order() {
        let p = Parallelizer::new(4);
        let items: Vec<usize> = (0..1000).collect();
        let out: Vec<usize> = p.map_chunks(&items, |off, c| {
            assert_eq!(c[0], off);
            c.iter().sum::<usize>()
        });
        assert_eq!(out.iter().sum::<usize>(), items.iter().sum::<usize>());
        let mut v = vec![0usize; 100];
        p.for_each_chunk_mut(&mut v, |off, c| c.iter_mut().enumerate().for_each(|(i, x)| *x = off + i));
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
