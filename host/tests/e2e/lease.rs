//! Leader election judges a Lease as client-go's leaderelection does: by when this replica saw its record change,
//! on its own clock, never by the holder's `renewTime` (which another node's skewed clock writes).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{free_port, wait_until, write_profile, ControlPlane, Kube, Scheduler};

const LEASE: &str = "skewed-scheduler";
const HOLDER: &str = "skewed-holder";

/// `renewTime` an hour behind, as a holder whose clock is an hour slow writes it.
fn an_hour_ago() -> MicroTime {
    MicroTime(Timestamp::now() - SignedDuration::from_hours(1))
}

pub(crate) fn a_renewed_lease_is_not_taken_whatever_its_renew_time(cp: &ControlPlane, k: &Kube, work: &Path) {
    let leases: Api<Lease> = Api::namespaced(k.client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE},
        "spec": {"holderIdentity": HOLDER, "leaseDurationSeconds": 3, "leaseTransitions": 0},
    }))
    .unwrap();
    // Records are compared to the second (as client-go's are), so each renewal moves renewTime on by a second more
    // than the wall clock does: every one is a change the scheduler sees, however the renewals fall in seconds.
    let renewals = std::cell::Cell::new(0i64);
    let renew = |mut l: Lease| -> Result<Lease, kube::Error> {
        let spec = l.spec.get_or_insert_with(Default::default);
        renewals.set(renewals.get() + 1);
        spec.renew_time = Some(MicroTime(an_hour_ago().0 + SignedDuration::from_secs(renewals.get())));
        spec.acquire_time.get_or_insert_with(an_hour_ago);
        k.rt.block_on(leases.replace(LEASE, &PostParams::default(), &l))
    };
    let created = k.rt.block_on(leases.create(&PostParams::default(), &lease)).unwrap();
    renew(created).unwrap();

    let profile = write_profile(work, "skewed.yaml", "profiles:\n- schedulerName: skewed-scheduler\n");
    std::fs::write(
        &profile,
        std::fs::read_to_string(&profile).unwrap().replace("leaderElect: false", "leaderElect: true"),
    )
    .unwrap();
    let flags = [
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-namespace=default",
        &format!("--leader-elect-resource-name={LEASE}"),
    ];
    let s = Scheduler::start(&cp.kubeconfig(), &profile, free_port(), &flags, work.join("skewed.log"));

    // The holder renews every 500 ms for 8 s, each renewTime an hour old: a live lease, never to be taken.
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        let current = k.rt.block_on(leases.get(LEASE)).unwrap();
        let holder = current.spec.as_ref().and_then(|s| s.holder_identity.clone());
        assert_eq!(holder.as_deref(), Some(HOLDER), "a renewed lease was taken:\n{}", s.log());
        // A conflict means someone else wrote the lease: the next get shows who.
        let _ = renew(current);
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(!s.log().contains("became leader"), "became leader of a renewed lease:\n{}", s.log());

    // The holder stops: its last record stays unchanged for leaseDuration (3 s) on the scheduler's clock, then the
    // scheduler takes over.
    let stopped = Instant::now();
    wait_until("the scheduler to take the abandoned lease", Duration::from_secs(20), || {
        s.log().contains("became leader").then_some(())
    });
    let took = stopped.elapsed();
    // The last renewal was written up to one retry period (500 ms) before `stopped`.
    assert!(took >= Duration::from_millis(2400), "taken {took:?} after the last renewal, before leaseDuration");
    let l = k.rt.block_on(leases.get(LEASE)).unwrap();
    let spec = l.spec.unwrap();
    assert_ne!(spec.holder_identity.as_deref(), Some(HOLDER));
    assert_eq!(spec.lease_transitions, Some(1), "taking the lease is a transition");
}
