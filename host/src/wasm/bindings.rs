//! The one place that calls `bindgen!`: host-side bindings of the whole contract (`wit/`). Each component is
//! then asked, interface by interface, which of these exports it really has.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "kws:plugin/scheduler-plugin",
    // A pod passed by reference is the framework's own `PodInfo`, shared, never copied.
    with: { "kws:plugin/host.pod-ref": super::host::PodRef },
    // A handle the host no longer holds traps the guest rather than panicking the host.
    imports: {
        "kws:plugin/host.[method]pod-ref.uid": trappable,
        "kws:plugin/host.[method]pod-ref.namespace": trappable,
        "kws:plugin/host.[method]pod-ref.name": trappable,
        "kws:plugin/host.[method]pod-ref.priority": trappable,
        "kws:plugin/host.[method]pod-ref.qos-class": trappable,
        "kws:plugin/host.[method]pod-ref.label": trappable,
        "kws:plugin/host.[method]pod-ref.annotation": trappable,
        "kws:plugin/host.[method]pod-ref.get": trappable,
        "kws:plugin/host.[drop]pod-ref": trappable,
    },
});
