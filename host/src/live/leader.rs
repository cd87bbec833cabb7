//! Leader election on a coordination.k8s.io/v1 Lease as client-go's `tools/leaderelection` runs it: acquire,
//! renew every retry period, give up after the renew deadline, and release on shutdown so another replica takes
//! over at once. A lease held by another replica is judged by when this replica saw its record change, on this
//! replica's clock (client-go's `observedTime`), never by the holder's `renewTime`: clocks of two nodes may
//! disagree by more than a lease duration.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease as LeaseObj, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use super::LiveError;
use crate::config::LeaderElection;

/// A lease's record as client-go compares it (`LeaderElectionRecord`, times to the second as its JSON has them).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    duration_seconds: i32,
    acquire: Option<i64>,
    renew: Option<i64>,
    transitions: i32,
    strategy: Option<String>,
    preferred_holder: Option<String>,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire: spec.acquire_time.as_ref().map(|t| t.0.as_second()),
            renew: spec.renew_time.as_ref().map(|t| t.0.as_second()),
            transitions: spec.lease_transitions.unwrap_or(0),
            strategy: spec.strategy.clone(),
            preferred_holder: spec.preferred_holder.clone(),
        }
    }
}

/// One replica's view of the lease.
pub(crate) struct Lease {
    api: Api<LeaseObj>,
    name: String,
    identity: String,
    duration: Duration,
    renew_deadline: Duration,
    retry: Duration,
    /// The record last seen and when this replica first saw it (client-go's `observedRecord`, `observedTime`).
    observed: Mutex<Option<(Record, Instant)>>,
}

impl Lease {
    pub(crate) fn new(client: Client, le: &LeaderElection, identity: String) -> Lease {
        Lease {
            api: Api::namespaced(client, &le.resource_namespace),
            name: le.resource_name.clone(),
            identity,
            duration: le.lease_duration,
            renew_deadline: le.renew_deadline,
            retry: le.retry_period,
            observed: Mutex::new(None),
        }
    }

    /// Notes `spec` as seen now; returns when its record was first seen (now, if it changed).
    fn observe(&self, spec: &LeaseSpec) -> Instant {
        let record = Record::of(spec);
        let mut observed = self.observed.lock().expect("observed lease lock");
        match &*observed {
            Some((r, since)) if *r == record => *since,
            _ => {
                let now = Instant::now();
                *observed = Some((record, now));
                now
            }
        }
    }

    /// Waits until this replica holds the lease.
    pub(crate) async fn acquire(&self) -> Result<(), LiveError> {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "leader election"),
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    /// Renews the lease until a renewal fails for longer than the renew deadline.
    pub(crate) async fn keep(&self) -> Result<(), LiveError> {
        let mut last_ok = Instant::now();
        loop {
            tokio::time::sleep(self.retry).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_ok = Instant::now(),
                Ok(false) => {
                    tracing::error!(lease = %self.name, "lease taken by another replica");
                    return Err(LiveError::LeaseLost);
                }
                Err(e) => tracing::warn!(error = %e, "renewing the lease"),
            }
            if last_ok.elapsed() > self.renew_deadline {
                tracing::error!(lease = %self.name, "could not renew the lease within the renew deadline");
                return Err(LiveError::LeaseLost);
            }
        }
    }

    /// Gives the lease up (holder cleared, one-second duration), if this replica holds it.
    pub(crate) async fn release(&self) {
        if let Ok(mut l) = self.api.get(&self.name).await {
            let spec = l.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() == Some(&self.identity) {
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                match self.api.replace(&self.name, &PostParams::default(), &l).await {
                    Ok(_) => tracing::info!(lease = %self.name, "lease released"),
                    Err(e) => tracing::warn!(error = %e, "releasing the lease"),
                }
            }
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let mine = |acquire: Option<MicroTime>, transitions: i32| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: acquire.or(Some(MicroTime(now))),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        };
        let existing = match self.api.get_opt(&self.name).await? {
            Some(l) => l,
            None => {
                let spec = mine(None, 0);
                let l = LeaseObj {
                    metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                    spec: Some(spec.clone()),
                };
                return match self.api.create(&PostParams::default(), &l).await {
                    Ok(_) => {
                        self.observe(&spec);
                        Ok(true)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let seen_since = self.observe(&spec);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0);
        let new_spec = if holder == self.identity {
            mine(spec.acquire_time.clone(), transitions)
        } else {
            // Valid while its record has not stayed the same for its duration, as this replica's clock measures.
            let duration = Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
            if !holder.is_empty() && seen_since + duration > Instant::now() {
                return Ok(false);
            }
            mine(None, transitions + 1)
        };
        let mut l = existing;
        l.spec = Some(new_spec.clone());
        match self.api.replace(&self.name, &PostParams::default(), &l).await {
            Ok(_) => {
                self.observe(&new_spec);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
