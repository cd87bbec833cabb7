//! Order-preserving keys for QueueSort ([`crate::Plugin::sort_key`]): fields appended one after another so that
//! comparing the bytes compares the fields in turn, as a tuple would.
//!
//! ```ignore
//! // Higher priority first, then Guaranteed before Burstable before BestEffort, then earlier queue time.
//! SortKey::new().desc_i64(pod.priority.into()).asc_u64(pod.qos_class.rank().into()).asc_u64(q.timestamp_ns).finish()
//! ```

/// A key under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SortKey(Vec<u8>);

impl SortKey {
    /// An empty key.
    pub fn new() -> Self {
        Self(Vec::with_capacity(32))
    }

    /// Smaller values first.
    pub fn asc_u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Larger values first.
    pub fn desc_u64(self, v: u64) -> Self {
        self.asc_u64(!v)
    }

    /// Smaller values first (negative before positive).
    pub fn asc_i64(self, v: i64) -> Self {
        // Flipping the sign bit maps i64's order onto u64's.
        self.asc_u64((v as u64) ^ (1 << 63))
    }

    /// Larger values first.
    pub fn desc_i64(self, v: i64) -> Self {
        self.desc_u64((v as u64) ^ (1 << 63))
    }

    /// Strings in byte order, a prefix before its extensions (`ns/a` before `ns/ab`). A string must not contain
    /// NUL, which ends it (Kubernetes names and label values never do).
    pub fn asc_str(mut self, s: &str) -> Self {
        self.0.extend(s.bytes().filter(|b| *b != 0));
        self.0.push(0);
        self
    }

    /// The key's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_compare_as_the_fields_would() {
        let key = |prio: i64, name: &str, ts: u64| SortKey::new().desc_i64(prio).asc_str(name).asc_u64(ts).finish();
        let mut keys = vec![
            key(-5, "a", 1),
            key(10, "b", 2),
            key(10, "a", 9),
            key(0, "ab", 0),
            key(0, "a", 7),
            key(i64::MIN, "", 0),
            key(i64::MAX, "z", u64::MAX),
        ];
        keys.sort();
        let want = vec![
            key(i64::MAX, "z", u64::MAX),
            key(10, "a", 9),
            key(10, "b", 2),
            key(0, "a", 7),
            key(0, "ab", 0),
            key(-5, "a", 1),
            key(i64::MIN, "", 0),
        ];
        assert_eq!(keys, want);
        assert!(SortKey::new().asc_i64(-1).finish() < SortKey::new().asc_i64(0).finish());
        assert!(SortKey::new().asc_u64(1).finish() < SortKey::new().asc_u64(256).finish());
    }
}
