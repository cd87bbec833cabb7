//! `Status` and `Code`: what every extension point answers, as in kube-scheduler's framework.

use std::fmt;
use std::sync::Arc;

/// The outcome class of a plugin call. The comments say what each does to the pod, as upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The plugin ran and the pod may go on.
    Success,
    /// An internal error or a misbehaving plugin: the attempt fails and the pod is retried with backoff.
    Error,
    /// The pod does not fit now; preemption may help; the pod waits for a cluster change.
    Unschedulable,
    /// The pod does not fit and preemption cannot help (e.g. node affinity); it waits for a cluster change.
    UnschedulableAndUnresolvable,
    /// A Permit plugin asks the pod to wait before binding.
    Wait,
    /// The plugin has nothing to do for this pod (PreFilter/PreScore skip; Bind passes to the next binder).
    Skip,
    /// The pod waits for something outside the scheduler; it is retried on a cluster change, without backoff penalty.
    Pending,
}

impl Code {
    /// Upstream's spelling of the code, used in metrics labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

/// The answer of a plugin: a code, the reasons (shown to users, counted in `0/N nodes are available`), and the
/// name of the plugin that rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    plugin: Option<Arc<str>>,
}

impl Default for Status {
    fn default() -> Self {
        Status::success()
    }
}

impl Status {
    /// A successful status; allocates nothing, so it is free on the hot path.
    pub const fn success() -> Status {
        Status { code: Code::Success, reasons: Vec::new(), plugin: None }
    }

    /// A status with a code and one reason.
    pub fn new(code: Code, reason: impl Into<String>) -> Status {
        Status { code, reasons: vec![reason.into()], plugin: None }
    }

    /// A status with a code and several reasons.
    pub fn with_reasons(code: Code, reasons: Vec<String>) -> Status {
        Status { code, reasons, plugin: None }
    }

    /// A status with only a code.
    pub fn code_only(code: Code) -> Status {
        Status { code, reasons: Vec::new(), plugin: None }
    }

    /// `Error` with a message.
    pub fn error(reason: impl Into<String>) -> Status {
        Status::new(Code::Error, reason)
    }

    /// `Unschedulable` with a reason.
    pub fn unschedulable(reason: impl Into<String>) -> Status {
        Status::new(Code::Unschedulable, reason)
    }

    /// `UnschedulableAndUnresolvable` with a reason.
    pub fn unresolvable(reason: impl Into<String>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// `Skip`.
    pub fn skip() -> Status {
        Status::code_only(Code::Skip)
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in order.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    /// The plugin that produced this status, if the runner tagged it.
    pub fn plugin(&self) -> Option<&str> {
        self.plugin.as_deref()
    }

    /// Tags the status with the plugin that produced it (the runner does this on every rejection).
    pub fn with_plugin(mut self, plugin: &Arc<str>) -> Status {
        if self.plugin.is_none() {
            self.plugin = Some(plugin.clone());
        }
        self
    }

    /// True for `Success`.
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// True for `Skip`.
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// True for the two rejection codes (and `Pending`, which also keeps a pod off a node).
    pub fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending)
    }

    /// All reasons joined with ", " (upstream's `Message()`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }

    /// Turns an `Error` status into a Rust error value for callers that want `?`.
    pub fn as_error(&self) -> Option<String> {
        (self.code == Code::Error).then(|| self.message())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.plugin, self.reasons.is_empty()) {
            (Some(p), false) => write!(f, "{} ({}): {}", self.code.as_str(), p, self.message()),
            (Some(p), true) => write!(f, "{} ({})", self.code.as_str(), p),
            (None, false) => write!(f, "{}: {}", self.code.as_str(), self.message()),
            (None, true) => f.write_str(self.code.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_has_no_reasons_and_is_not_rejected() {
        let s = Status::success();
        assert!(s.is_success());
        assert!(!s.is_rejected());
        assert_eq!(s.message(), "");
    }

    #[test]
    fn plugin_tag_is_kept_once() {
        let a: Arc<str> = Arc::from("A");
        let b: Arc<str> = Arc::from("B");
        let s = Status::unschedulable("x").with_plugin(&a).with_plugin(&b);
        assert_eq!(s.plugin(), Some("A"));
        assert_eq!(s.to_string(), "Unschedulable (A): x");
    }

    #[test]
    fn rejection_codes() {
        assert!(Status::unresolvable("x").is_rejected());
        assert!(Status::code_only(Code::Pending).is_rejected());
        assert!(!Status::error("x").is_rejected());
        assert_eq!(Status::with_reasons(Code::Error, vec!["a".into(), "b".into()]).message(), "a, b");
    }
}
