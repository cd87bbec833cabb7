//! kube-scheduler's feature gates that change what this scheduler does, versioned as upstream's
//! `pkg/features` declares them, so that `--emulated-version` gives a 1.35 or 1.36 control plane that release's
//! defaults and `--feature-gates` is refused where upstream's gate refuses it (a locked gate, one that does not
//! exist yet at the emulated release).

/// A gate's maturity at a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Alpha: off by default, `AllAlpha` turns it on.
    Alpha,
    /// Beta: `AllBeta` sets it.
    Beta,
    /// GA: set only with a warning, or locked.
    Ga,
}

/// One entry of a gate's versioned specs: from release `1.minor` on (until a later entry), this default.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The first kube minor the entry applies to.
    pub minor: u32,
    /// Whether the gate is on unless set.
    pub default: bool,
    /// Its maturity.
    pub stage: Stage,
    /// Whether setting it to the other value is refused.
    pub locked: bool,
    /// The entry applies only when `--min-compatibility-version` is at least this minor (upstream's
    /// `MinCompatibilityVersion`: a default that would break a rollback waits until no older release remains).
    pub min_compatibility: Option<u32>,
}

const fn s(minor: u32, default: bool, stage: Stage) -> Spec {
    Spec { minor, default, stage, locked: false, min_compatibility: None }
}

const fn locked(minor: u32, default: bool, stage: Stage) -> Spec {
    Spec { minor, default, stage, locked: true, min_compatibility: None }
}

use Stage::{Alpha, Beta, Ga};

/// A gate this scheduler acts on: its name and its versioned specs, oldest first (k8s.io/kubernetes
/// pkg/features/kube_features.go at v1.37.2).
pub struct Gate {
    /// The gate's name in `--feature-gates`.
    pub name: &'static str,
    /// Its specs, oldest first.
    pub specs: &'static [Spec],
    /// Its field in [`Features`].
    field: fn(&mut Features) -> &mut bool,
}

/// The gates whose value changes what this scheduler does, by name.
pub static GATES: &[Gate] = &[
    Gate {
        name: "GenericWorkload",
        specs: &[s(35, false, Alpha), s(37, false, Beta)],
        field: |f| &mut f.generic_workload,
    },
    Gate {
        name: "NodeDeclaredFeatures",
        specs: &[s(35, false, Alpha), s(36, true, Beta), locked(37, true, Ga)],
        field: |f| &mut f.node_declared_features,
    },
    Gate {
        name: "DRAExtendedResource",
        specs: &[s(34, false, Alpha), s(36, true, Beta), locked(37, true, Ga)],
        field: |f| &mut f.dra_extended_resource,
    },
    Gate {
        name: "DRADeviceTaints",
        specs: &[s(33, false, Alpha), s(36, true, Beta), s(37, true, Ga)],
        field: |f| &mut f.dra_device_taints,
    },
    Gate {
        name: "DRADeviceTaintRules",
        specs: &[s(35, false, Alpha), s(36, false, Beta), s(37, true, Ga)],
        field: |f| &mut f.dra_device_taint_rules,
    },
    Gate {
        name: "DRAPartitionableDevices",
        specs: &[s(33, false, Alpha), s(36, true, Beta)],
        field: |f| &mut f.dra_partitionable_devices,
    },
    Gate {
        name: "DRADeviceBindingConditions",
        specs: &[s(34, false, Alpha), s(36, true, Beta)],
        field: |f| &mut f.dra_device_binding_conditions,
    },
    Gate {
        name: "VolumeLimitScaling",
        specs: &[s(35, false, Alpha), s(37, true, Beta)],
        field: |f| &mut f.volume_limit_scaling,
    },
    Gate {
        name: "StorageCapacityScoring",
        specs: &[s(33, false, Alpha), s(37, true, Beta)],
        field: |f| &mut f.storage_capacity_scoring,
    },
    Gate {
        name: "SchedulerPopFromBackoffQ",
        specs: &[s(33, true, Beta)],
        field: |f| &mut f.scheduler_pop_from_backoff_q,
    },
    Gate {
        name: "SchedulerAsyncPreemption",
        specs: &[s(32, false, Alpha), s(33, true, Beta)],
        field: |f| &mut f.scheduler_async_preemption,
    },
    Gate { name: "OpportunisticBatching", specs: &[s(35, true, Beta)], field: |f| &mut f.opportunistic_batching },
    Gate {
        name: "NominatedNodeNameForExpectation",
        specs: &[s(34, false, Alpha), s(35, true, Beta)],
        field: |f| &mut f.nominated_node_name_for_expectation,
    },
];

/// The gates that change what a configuration means or what a plugin does, resolved for one run
/// ([`Features::resolve`]); `Default` is a v1.37 binary's with no `--feature-gates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// GenericWorkload (beta, off by default in v1.37): the Workload/PodGroup API. The default profile gains
    /// GangScheduling, PodGroups are watched, and a group's queued members are scheduled in one PodGroup cycle.
    pub generic_workload: bool,
    /// NodeDeclaredFeatures: the default profile runs the plugin that matches a pod's needs to a node's
    /// `status.declaredFeatures`.
    pub node_declared_features: bool,
    /// DRAExtendedResource: an extended resource a DeviceClass provides is allocated as devices.
    pub dra_extended_resource: bool,
    /// DRADeviceTaints: devices' taints keep claims that do not tolerate them away.
    pub dra_device_taints: bool,
    /// DRADeviceTaintRules: DeviceTaintRule objects taint the devices they select.
    pub dra_device_taint_rules: bool,
    /// DRAPartitionableDevices: devices drawing on counters a ResourceSlice shares.
    pub dra_partitionable_devices: bool,
    /// DRADeviceBindingConditions: binding waits until an allocated device reports its conditions.
    pub dra_device_binding_conditions: bool,
    /// VolumeLimitScaling: a CSIDriver with `preventPodSchedulingIfMissing` keeps pods with its new volumes off
    /// nodes whose CSINode does not list it.
    pub volume_limit_scaling: bool,
    /// StorageCapacityScoring: VolumeBinding scores nodes by how full their storage for the pod's classes is.
    pub storage_capacity_scoring: bool,
    /// NominatedNodeNameForExpectation: the node is nominated before PreBind or a Permit wait.
    pub nominated_node_name_for_expectation: bool,
    /// OpportunisticBatching (beta, on by default since v1.35): a profile whose plugins can all sign pods hands
    /// the next pod with the same signature the runner-up node of the previous cycle as a hint, checked like a
    /// nominated node, instead of filtering and scoring every node again.
    pub opportunistic_batching: bool,
    /// SchedulerPopFromBackoffQ (beta, on by default since v1.33): when activeQ is empty the next pod comes from
    /// backoffQ, and backoff ends on whole seconds.
    pub scheduler_pop_from_backoff_q: bool,
    /// SchedulerAsyncPreemption (beta, on by default since v1.33): a preemption's victims are deleted off the
    /// scheduling loop, and the preemptor waits at DefaultPreemption's PreEnqueue until they are gone.
    pub scheduler_async_preemption: bool,
}

impl Default for Features {
    fn default() -> Features {
        Features::at(Versions::default())
    }
}

/// The releases a run emulates: `--emulated-version` and `--min-compatibility-version` (defaults: the binary's
/// release and the one before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The emulated kube minor.
    pub emulated: u32,
    /// The oldest kube minor the run must stay compatible with.
    pub min_compatibility: u32,
}

/// The kube minor this scheduler's behaviour follows by default.
pub const BINARY_MINOR: u32 = 37;
/// The oldest minor it emulates (three releases back, as component-base allows).
pub const MIN_EMULATED_MINOR: u32 = 34;

impl Default for Versions {
    fn default() -> Versions {
        Versions { emulated: BINARY_MINOR, min_compatibility: BINARY_MINOR - 1 }
    }
}

impl Versions {
    /// Emulating `emulated` (minimum compatibility: the release before it unless given).
    pub fn new(emulated: Option<u32>, min_compatibility: Option<u32>) -> Versions {
        let emulated = emulated.unwrap_or(BINARY_MINOR);
        Versions { emulated, min_compatibility: min_compatibility.unwrap_or(emulated.saturating_sub(1)) }
    }
}

impl Gate {
    /// The spec in force at `v` (None: the gate does not exist yet there, upstream's PreAlpha).
    pub fn spec_at(&self, v: Versions) -> Option<&'static Spec> {
        self.specs
            .iter()
            .rev()
            .find(|s| s.minor <= v.emulated && s.min_compatibility.is_none_or(|m| v.min_compatibility >= m))
    }
}

impl Features {
    /// Every gate at its default for `v`.
    pub fn at(v: Versions) -> Features {
        Features::resolve(v, &[]).expect("defaults are valid")
    }

    /// The gates for `v` with `--feature-gates`' pairs applied as upstream applies them: a gate named explicitly
    /// wins over `AllAlpha`/`AllBeta` whatever the order; a locked gate cannot be changed and a gate that does not
    /// exist at the emulated release cannot be set (errors in upstream's words). Names not in [`GATES`] are left
    /// to the caller (they change nothing here).
    pub fn resolve(v: Versions, pairs: &[(&str, bool)]) -> Result<Features, String> {
        let mut f = Features {
            generic_workload: false,
            node_declared_features: false,
            dra_extended_resource: false,
            dra_device_taints: false,
            dra_device_taint_rules: false,
            dra_partitionable_devices: false,
            dra_device_binding_conditions: false,
            volume_limit_scaling: false,
            storage_capacity_scoring: false,
            nominated_node_name_for_expectation: false,
            opportunistic_batching: false,
            scheduler_pop_from_backoff_q: false,
            scheduler_async_preemption: false,
        };
        let last = |name: &str| pairs.iter().rev().find(|(k, _)| *k == name).map(|&(_, on)| on);
        let (all_alpha, all_beta) = (last("AllAlpha"), last("AllBeta"));
        let mut errors = Vec::new();
        for gate in GATES {
            let spec = gate.spec_at(v);
            let mut on = spec.is_some_and(|s| s.default);
            if let Some(s) = spec {
                match s.stage {
                    Alpha => on = all_alpha.unwrap_or(on),
                    Beta => on = all_beta.unwrap_or(on),
                    Ga => {}
                }
            }
            if let Some(want) = last(gate.name) {
                match spec {
                    Some(s) if s.locked && s.default != want => errors.push(format!(
                        "cannot set feature gate {} to {want}, feature is locked to {}",
                        gate.name, s.default
                    )),
                    Some(_) => on = want,
                    None => errors.push(format!(
                        "cannot set feature gate {} to {want}, feature is PreAlpha at emulated version 1.{}, min \
                         compatibility version 1.{}",
                        gate.name, v.emulated, v.min_compatibility
                    )),
                }
            }
            *(gate.field)(&mut f) = on;
        }
        if errors.is_empty() {
            Ok(f)
        } else {
            Err(errors.join(", "))
        }
    }

    /// The gate named `name`'s value, None for a gate not in [`GATES`].
    pub fn get(&self, name: &str) -> Option<bool> {
        let gate = GATES.iter().find(|g| g.name == name)?;
        let mut copy = *self;
        Some(*(gate.field)(&mut copy))
    }
}

/// Whether `--feature-gates` may name `name` and change something here: a gate of [`GATES`], or AllAlpha/AllBeta.
pub fn is_ours(name: &str) -> bool {
    matches!(name, "AllAlpha" | "AllBeta") || GATES.iter().any(|g| g.name == name)
}

/// `--feature-gates`' values, in the order given: `Gate=true|false` pairs, comma-separated.
pub fn parse_pairs<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Vec<(&'a str, bool)>, String> {
    let mut out = Vec::new();
    for pair in values.into_iter().flat_map(|v| v.split(',')).map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not a Gate=true|false pair"))?;
        let on = match v.trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("{}={other}: want true or false", k.trim())),
        };
        out.push((k.trim(), on));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_release_gets_its_defaults() {
        let at = |m| Features::at(Versions::new(Some(m), None));
        let (v35, v36, v37) = (at(35), at(36), at(37));
        assert_eq!(v37, Features::default());
        assert!(v37.node_declared_features && v36.node_declared_features && !v35.node_declared_features);
        assert!(v37.dra_extended_resource && v36.dra_extended_resource && !v35.dra_extended_resource);
        assert!(v37.dra_device_taint_rules && !v36.dra_device_taint_rules);
        assert!(v37.volume_limit_scaling && !v36.volume_limit_scaling);
        assert!(v37.storage_capacity_scoring && !v36.storage_capacity_scoring);
        assert!(v35.nominated_node_name_for_expectation && !at(34).nominated_node_name_for_expectation);
        assert!(v35.opportunistic_batching && !at(34).opportunistic_batching);
        assert!(!v37.generic_workload);
        assert!(at(34).scheduler_pop_from_backoff_q && v37.scheduler_pop_from_backoff_q);
        assert!(at(34).scheduler_async_preemption && v37.scheduler_async_preemption);
    }

    #[test]
    fn explicit_gates_win_over_all_beta_and_locks_refuse() {
        let v37 = Versions::default();
        let f = Features::resolve(v37, &[("GenericWorkload", false), ("AllBeta", true)]).unwrap();
        assert!(!f.generic_workload && f.volume_limit_scaling);
        assert!(Features::resolve(v37, &[("AllBeta", true)]).unwrap().generic_workload);
        let no_beta = Features::resolve(v37, &[("AllBeta", false)]).unwrap();
        assert!(!no_beta.volume_limit_scaling && !no_beta.dra_partitionable_devices && no_beta.node_declared_features);
        // GenericWorkload is alpha at 1.36: AllBeta leaves it, AllAlpha sets it.
        let v36 = Versions::new(Some(36), None);
        assert!(!Features::resolve(v36, &[("AllBeta", true)]).unwrap().generic_workload);
        assert!(Features::resolve(v36, &[("AllAlpha", true)]).unwrap().generic_workload);
        assert_eq!(
            Features::resolve(v37, &[("NodeDeclaredFeatures", false)]).unwrap_err(),
            "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"
        );
        // Not locked at 1.36: turned off there.
        assert!(!Features::resolve(v36, &[("NodeDeclaredFeatures", false)]).unwrap().node_declared_features);
        assert_eq!(
            Features::resolve(Versions::new(Some(34), None), &[("GenericWorkload", true)]).unwrap_err(),
            "cannot set feature gate GenericWorkload to true, feature is PreAlpha at emulated version 1.34, min \
             compatibility version 1.33"
        );
        assert_eq!(Features::default().get("DRADeviceTaints"), Some(true));
        assert_eq!(Features::default().get("Nope"), None);
    }
}
