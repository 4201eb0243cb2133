//! What every controller of a manager shares: the client pool, the watches, the readiness state and the
//! metrics.

use std::sync::Arc;

use tokio::sync::watch;

use crate::client::ClientPool;
use crate::client::Role;
use crate::core::Error;
use crate::ha::ShardState;
use crate::members::MemberSet;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::watch::WatchRegistry;

/// The shared parts of a running manager.
pub(crate) struct Runtime {
    pub(crate) pool: ClientPool,
    pub(crate) watches: WatchRegistry,
    pub(crate) readiness: Arc<Readiness>,
    pub(crate) metrics: Metrics,
    /// Whether this replica leads: its controllers run only while it does.
    pub(crate) role: watch::Receiver<Role>,
    /// In sharded mode: the shards and this replica's hold on them.
    pub(crate) shards: Option<Arc<ShardState>>,
    /// The fleet's members, beside the fixed contexts of the pool.
    pub(crate) members: MemberSet,
}

impl Runtime {
    /// The client of the cluster `context` for work fenced by `shard` (in sharded mode, the shard of the
    /// parent the work is for): its writes pass that shard's fence as well. `None`: the leader's fence alone.
    pub(crate) fn client(
        &self,
        context: &str,
        shard: Option<usize>,
    ) -> crate::core::Result<kube::Client> {
        if let Some(reason) = self.readiness.identities().refusal(context) {
            let cluster = context.to_owned();
            return Err(Error::NotWritten { cluster, reason });
        }
        let base = match self.pool.client(context) {
            // Not a fixed context: a member, or the pool's error.
            Err(error @ Error::UndeclaredContext { .. }) => {
                self.members.client(context).ok_or(error)?
            }
            other => other?,
        };
        Ok(match (&self.shards, shard) {
            (Some(shards), Some(shard)) => shards.fenced_client(shard, context, base),
            _ => base,
        })
    }

    /// When the server of `cluster` (a context or a member) last answered one of its clients, if it has.
    pub(crate) fn last_answer(&self, cluster: &str) -> Option<tokio::time::Instant> {
        (self.pool.last_answer(cluster)).or_else(|| self.members.last_answer(cluster))
    }

    /// Whether the fence that work fenced by `shard` writes behind still belongs to this replica by its Lease
    /// loop's last decision (the shard's in sharded mode; else the leader's), even if it lapsed a moment ago.
    pub(crate) fn still_holds_fence(&self, shard: Option<usize>) -> bool {
        match (&self.shards, shard) {
            (Some(shards), Some(shard)) => shards.claims(shard),
            _ => self.role.borrow().leader,
        }
    }

    /// Forgets the clients kept for member `name` beyond the member set (its shard clients): it left, or
    /// its credentials changed.
    pub(crate) fn forget_member_clients(&self, name: &str) {
        if let Some(shards) = &self.shards {
            shards.forget(name);
        }
    }

    /// A runtime that reaches each of these contexts through its client, as one of a sole replica (tests).
    #[cfg(test)]
    pub(crate) fn of_clients(
        clients: impl IntoIterator<Item = (&'static str, kube::Client)>,
    ) -> Arc<Self> {
        let readiness = Arc::new(Readiness::default());
        Arc::new(Self {
            pool: ClientPool::from_clients(clients),
            watches: WatchRegistry::new(readiness.clone(), Default::default()),
            readiness,
            metrics: Default::default(),
            role: watch::channel(Role::sole()).1,
            shards: None,
            members: Default::default(),
        })
    }
}
