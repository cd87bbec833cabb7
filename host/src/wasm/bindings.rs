//! The one place that calls `bindgen!`: host-side bindings of the whole contract (`wit/`). Each component is
//! then asked, interface by interface, which of these exports it really has.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "kws:plugin/scheduler-plugin",
});
