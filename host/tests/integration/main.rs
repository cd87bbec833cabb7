//! Integration tests in one binary, a module per area.

mod util;

mod config;
mod deploy;
mod framework;
mod lifting;
mod queue;
mod simulate;
mod wasm;
