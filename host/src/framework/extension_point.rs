//! How to ask a plugin whether it serves an extension point (the points themselves are listed once, in
//! `config::extension_point`, where the configuration names them).

use super::interface::Plugin;

pub use crate::config::extension_point::{ExtensionPoint, NUM_EXTENSION_POINTS};

impl ExtensionPoint {
    /// Whether `plugin` serves this point (its `as_*` accessor answers).
    pub fn served_by(self, plugin: &dyn Plugin) -> bool {
        match self {
            ExtensionPoint::PreEnqueue => plugin.as_pre_enqueue().is_some(),
            ExtensionPoint::QueueSort => plugin.as_queue_sort().is_some(),
            ExtensionPoint::PreFilter => plugin.as_pre_filter().is_some(),
            ExtensionPoint::Filter => plugin.as_filter().is_some(),
            ExtensionPoint::PostFilter => plugin.as_post_filter().is_some(),
            ExtensionPoint::PreScore => plugin.as_pre_score().is_some(),
            ExtensionPoint::Score => plugin.as_score().is_some(),
            ExtensionPoint::Reserve => plugin.as_reserve().is_some(),
            ExtensionPoint::Permit => plugin.as_permit().is_some(),
            ExtensionPoint::PreBind => plugin.as_pre_bind().is_some(),
            ExtensionPoint::Bind => plugin.as_bind().is_some(),
            ExtensionPoint::PostBind => plugin.as_post_bind().is_some(),
        }
    }
}
