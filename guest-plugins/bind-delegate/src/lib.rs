//! BindDelegate: a Bind plugin that binds nothing itself: it logs the decision and answers Skip, so the next binder
//! (in the end kube-scheduler's DefaultBinder) binds the pod. The shape of a custom binder that only binds some
//! pods.

use kws_plugin_sdk::{Config, Plugin, Pod, Status};

/// The plugin (no configuration).
pub struct BindDelegate;

impl Plugin for BindDelegate {
    type NodeData = ();

    fn new(config: &Config) -> Result<Self, String> {
        config.expect_keys(&[])?;
        Ok(BindDelegate)
    }

    fn bind(&self, pod: &Pod, node: &str) -> Status {
        kws_plugin_sdk::info!("Decision: {} => {node}, bound by the next binder", pod.key());
        Status::skip()
    }
}

kws_plugin_sdk::export!(BindDelegate: bind);

#[cfg(test)]
mod tests {
    use super::*;
    use kws_plugin_sdk::{testing, Code, Level};

    #[test]
    fn skips_and_logs_the_decision() {
        let st = testing::bind::<BindDelegate>(Pod::new("team-a", "web-1"), "node-3");
        assert_eq!(st.code, Code::Skip);
        assert_eq!(
            testing::take_logs(),
            [(Level::Info, "Decision: team-a/web-1 => node-3, bound by the next binder".into())]
        );
    }

    #[test]
    fn takes_no_configuration() {
        testing::set_config(r#"{"x": 1}"#);
        assert!(testing::validate::<BindDelegate>().is_err());
    }
}
