//! A small expiring map for review results (upstream caches TokenReview and SubjectAccessReview answers briefly
//! so a scrape every few seconds does not cost an API call each).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept at most; expired entries are dropped first, then the map is cleared (a flood of distinct tokens
/// must not grow memory without bound).
const CAPACITY: usize = 4096;

/// Values by key, each until its own deadline.
pub(crate) struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    /// An empty cache.
    pub fn new() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }

    /// The value under `key` unless it expired.
    pub fn get(&self, key: &str) -> Option<V> {
        let mut m = self.entries.lock().expect("cache lock");
        match m.get(key) {
            Some((deadline, v)) if *deadline > Instant::now() => Some(v.clone()),
            Some(_) => {
                m.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` under `key` for `ttl` (a zero TTL keeps nothing).
    pub fn insert(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut m = self.entries.lock().expect("cache lock");
        if m.len() >= CAPACITY {
            let now = Instant::now();
            m.retain(|_, (deadline, _)| *deadline > now);
            if m.len() >= CAPACITY {
                m.clear();
            }
        }
        m.insert(key, (Instant::now() + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_zero_ttl_keeps_nothing() {
        let c = TtlCache::new();
        c.insert("a".into(), 1, Duration::from_secs(60));
        c.insert("b".into(), 2, Duration::ZERO);
        c.insert("c".into(), 3, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(c.get("a"), Some(1));
        assert_eq!(c.get("b"), None);
        assert_eq!(c.get("c"), None);
    }
}
