//! Integration tests in one binary, a module per area.

#[path = "../common/oci_registry.rs"]
mod oci_registry;
mod util;

mod author;
mod batching;
mod compare;
mod config;
mod config_props;
mod contract;
mod declarations;
mod delivery;
mod deploy;
mod extenders;
mod framework;
mod gang;
mod glue;
mod go_guest;
mod guest_failures;
mod hostile_sources;
mod layers;
mod lifting;
mod pod_ref;
mod points;
mod properties;
mod queue;
mod reasons;
mod shadow;
mod simulate;
mod tenancy;
mod tls_errors;
mod volumes;
mod wasm;
