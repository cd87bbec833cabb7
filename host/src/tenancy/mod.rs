//! Tenant scheduling policies: WebAssembly components that tenants (SchedulingPolicy, in their namespace) and the
//! platform team (ClusterSchedulingPolicy) attach to a profile as Kubernetes objects, served by the profile's
//! `TenantPolicies` plugin within the limits its args set.
//!
//! The plugin stands at each point it serves for every policy of the profile: for a pod it calls only the policies
//! that select the pod (a namespaced policy: its own namespace's pods, narrowed by its pod selector), so a policy
//! can remove nodes only for its own pods and add only its capped weight to their scores. What a tenant's guest can
//! see of other namespaces is cut down in the Wasm host (`wasm::host::TenantScope`): their pods only as anonymous
//! usage on nodes. Policies are loaded off the scheduling path and swapped in whole; a refused version leaves the
//! previous one serving.

mod limits;
mod plugin;
mod policy;

pub use limits::{NamespacedLimits, TenantPoliciesArgs, CPU_BUDGET_WINDOW, NEVER_NAMESPACED};
pub use plugin::TenantPolicies;
pub use policy::{admit, decode_spec, Admitted, PolicyError, PolicySpec};

use crate::framework::ExtensionPoint;

/// The plugin's name in a profile.
pub const NAME: &str = "TenantPolicies";

/// An extension point, as a policy names it (`Filter`).
pub type Point = ExtensionPoint;

/// The points a tenant policy can serve here: the ones the plugin dispatches per pod. PreBind and PostBind are not
/// served to tenants (they act on the API server for the pod, which is the platform's business).
pub const SERVED_POINTS: [Point; 7] =
    [Point::PreEnqueue, Point::PreFilter, Point::Filter, Point::PreScore, Point::Score, Point::Reserve, Point::Permit];

/// The point a point comes with: a policy allowed a point may serve its companion too, which can only act on the
/// same pod (PreFilter narrows or refuses what Filter would; PreScore prepares Score; Reserve and Unreserve hold
/// and release what Permit waits on).
pub fn companion_of(p: Point) -> Option<Point> {
    match p {
        Point::PreFilter => Some(Point::Filter),
        Point::PreScore => Some(Point::Score),
        Point::Reserve => Some(Point::Permit),
        _ => None,
    }
}

/// The point a policy or the limits name (`PreFilter`), among those tenant policies can serve.
pub fn point_named(name: &str) -> Option<Point> {
    SERVED_POINTS.into_iter().find(|p| p.metric_name() == name)
}

/// The names [`point_named`] knows, quoted, for messages.
pub fn supported_points() -> String {
    SERVED_POINTS.iter().map(|p| format!("{:?}", p.metric_name())).collect::<Vec<_>>().join(", ")
}

/// Adds the `TenantPolicies` plugin to a registry (the binaries' registry: the in-tree plugins and this one).
pub fn register(registry: &mut crate::framework::Registry) {
    let _ = registry.register(
        NAME,
        std::sync::Arc::new(|args, ctx| {
            let p = TenantPolicies::new(args, ctx, &ctx.profile)?;
            Ok(p as std::sync::Arc<dyn crate::framework::Plugin>)
        }),
    );
}
