//! kube-wasm-scheduler: a Kubernetes scheduler that runs the framework cycle natively and lets extension points be
//! served by WebAssembly components.

pub mod author;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod extender;
pub mod framework;
pub mod live;
pub mod options;
pub mod plugins;
pub mod queue;
pub mod scheduler;
pub mod server;
pub mod sim;
pub mod tenancy;
pub mod wasm;
pub mod yaml;
