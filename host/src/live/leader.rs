//! Leader election on a coordination.k8s.io/v1 Lease: acquire, renew every retry period, give up after the renew
//! deadline, and release on shutdown so another replica takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease as LeaseObj, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use super::LiveError;
use crate::config::LeaderElection;

/// One replica's view of the lease.
pub(crate) struct Lease {
    api: Api<LeaseObj>,
    name: String,
    identity: String,
    duration: Duration,
    renew_deadline: Duration,
    retry: Duration,
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
                let l = LeaseObj {
                    metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() },
                    spec: Some(mine(None, 0)),
                };
                return match self.api.create(&PostParams::default(), &l).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0);
        let new_spec = if holder == self.identity {
            mine(spec.acquire_time.clone(), transitions)
        } else {
            let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
                (Some(t), Some(d)) => t.0.as_second() + i64::from(d) < now.as_second(),
                _ => true,
            };
            if !holder.is_empty() && !expired {
                return Ok(false);
            }
            mine(None, transitions + 1)
        };
        let mut l = existing;
        l.spec = Some(new_spec);
        match self.api.replace(&self.name, &PostParams::default(), &l).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
