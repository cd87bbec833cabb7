//! Integration tests in one binary, a module per area.

mod util;

mod config;
mod deploy;
mod framework;
mod properties;
mod queue;
mod simulate;
mod wasm;
