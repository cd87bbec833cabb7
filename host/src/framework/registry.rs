//! The plugin registry: plugin name → factory (upstream's `framework/runtime/registry.go`). The native plugins
//! fill one in `plugins::in_tree_registry`; Wasm plugins add theirs from the profile.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::handle::PluginContext;
use super::interface::Plugin;

/// Builds a plugin from its `pluginConfig` args (JSON; `None` when the profile gives none).
pub type PluginFactory =
    Arc<dyn Fn(Option<&serde_json::Value>, &PluginContext) -> Result<Arc<dyn Plugin>, String> + Send + Sync>;

/// Plugin name → factory. Refuses a second plugin of the same name.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, PluginFactory>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a factory; a name that is already registered is an error.
    pub fn register(&mut self, name: &str, factory: PluginFactory) -> Result<(), String> {
        if self.factories.contains_key(name) {
            return Err(format!("plugin {name:?} is registered twice"));
        }
        self.factories.insert(name.to_string(), factory);
        Ok(())
    }

    /// The factory for a name.
    pub fn get(&self, name: &str) -> Option<&PluginFactory> {
        self.factories.get(name)
    }

    /// All registered names, sorted (shown in "unknown plugin" errors).
    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }
}

/// Decodes a plugin's args into its typed args struct; absent args give the defaults. Unknown fields are errors.
pub fn decode_args<T: DeserializeOwned + Default>(args: Option<&serde_json::Value>) -> Result<T, String> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
    }
}
