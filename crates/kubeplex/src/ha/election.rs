//! The coordination a manager runs — none, leader election or sharded mode — as the controllers see it:
//! a role that says whether they run, and an end that gives the Leases up.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::sync::watch;

use super::leader::{LeaderElection, run};
use super::shard_state::ShardState;
use super::sharding::Sharding;
use crate::client::{Access, Fence, Role};
use crate::readiness::{LeadershipReport, Readiness, ShardingReport};

/// The election a manager runs, or none: the role its controllers follow, and how to end it.
pub(crate) struct Election {
    role: watch::Receiver<Role>,
    /// Without an election, the sender of the constant role (kept, so the role never reads as ended).
    _sole: Option<watch::Sender<Role>>,
    running: Option<(watch::Sender<bool>, tokio::task::JoinHandle<()>)>,
}

impl Election {
    /// No election: this replica leads, always.
    pub(crate) fn none() -> Self {
        let (sole, role) = watch::channel(Role::sole());
        Self {
            role,
            _sole: Some(sole),
            running: None,
        }
    }

    /// Starts `election` with a client of its own on `access` (the Lease's writes are the only ones that
    /// must pass while the fence is closed); `readiness` reports the role.
    pub(crate) fn start(
        election: LeaderElection,
        access: Access,
        fence: Fence,
        readiness: Arc<Readiness>,
    ) -> crate::core::Result<Self> {
        let api =
            lease_api(&access, &election).map_err(|reason| crate::core::Error::LeaderElection {
                lease: election.lease(),
                reason,
            })?;
        let (role_sender, role) = watch::channel(Role {
            leader: false,
            holder: None,
        });
        let (stop, stopped) = watch::channel(false);
        let identity = election.identity.clone();
        let mut reported = role.clone();
        let report = move |role: &Role| LeadershipReport {
            identity: identity.clone(),
            role: if role.leader { "leader" } else { "standby" },
            holder: role.holder.clone(),
        };
        readiness.set_leadership(report(&reported.borrow()));
        let task = tokio::spawn(async move {
            let reporting = async {
                while reported.changed().await.is_ok() {
                    let now = report(&reported.borrow_and_update());
                    readiness.set_leadership(now);
                }
            };
            tokio::select! {
                () = run(api, election, fence, role_sender, stopped) => {}
                () = reporting => {}
            }
        });
        Ok(Self {
            role,
            _sole: None,
            running: Some((stop, task)),
        })
    }

    /// Starts sharded mode: like [`start`](Self::start), with `member` as the pool's fence (open while this
    /// replica's member Lease is renewed) and `state` the shards' fences.
    pub(crate) fn start_sharded(
        sharding: Sharding,
        leases: Vec<String>,
        access: Access,
        member: Fence,
        state: Arc<ShardState>,
        readiness: Arc<Readiness>,
    ) -> crate::core::Result<Self> {
        let api =
            lease_api(&access, &sharding.lease).map_err(|reason| crate::core::Error::Sharding {
                group: sharding.group(),
                reason,
            })?;
        let (role_sender, role) = watch::channel(Role {
            leader: false,
            holder: None,
        });
        readiness.set_sharding(ShardingReport {
            identity: sharding.lease.identity.clone(),
            members: Vec::new(),
            shards: Vec::new(),
        });
        let (stop, stopped) = watch::channel(false);
        let group = super::shard_leases::Group {
            api,
            sharding,
            leases,
            state,
            member,
            role: role_sender,
            readiness,
        };
        let task = tokio::spawn(super::shard_leases::run(group, stopped));
        Ok(Self {
            role,
            _sole: None,
            running: Some((stop, task)),
        })
    }

    /// Whether this replica leads, as it changes.
    pub(crate) fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Ends the election, giving the Lease up if held.
    pub(crate) async fn end(self) {
        if let Some((stop, task)) = self.running {
            let _ = stop.send(true);
            let _ = task.await;
        }
    }
}

/// An `Api` of Leases in `election`'s namespace, over a client of its own on `access` (the Leases' writes
/// are the only ones that must pass while the pool's fence is closed); why not, in words.
fn lease_api(access: &Access, election: &LeaderElection) -> Result<Api<Lease>, String> {
    let client = crate::client::own_client(access)
        .map_err(|e| format!("context {}: cannot build a client: {e}", election.context,))?;
    Ok(Api::namespaced(client, &election.namespace))
}
