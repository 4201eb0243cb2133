//! What a webhook handler sees of the fleet: every cluster's caches and readiness, read-only.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::core::{Cluster, Context, Error, Member, PrimaryResource, Result, kind_label};
use crate::readiness::ClusterReport;
use crate::runtime::Runtime;

/// A read-only view of the fleet for a webhook handler: the objects the manager's controllers cache in
/// each cluster (their primaries, watched kinds and children cached as objects), and each cluster's
/// readiness. It reads memory only, so a handler answers within its bound whichever cluster is down, and a
/// standby replica answers from the same warm caches as the leader.
pub struct FleetView<C> {
    runtime: Arc<Runtime>,
    fleet: PhantomData<fn() -> C>,
}

impl<C: Context> FleetView<C> {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            runtime,
            fleet: PhantomData,
        }
    }

    /// Every cached object of kind `K` in a context or a member, without a request: from the watches any
    /// controller of the manager declared there. A kind no controller watches in `cluster` is
    /// [`Error::NotWatched`]; a cluster whose watches have not listed yet reads empty
    /// ([`clusters`](Self::clusters) says which have).
    pub fn cached<K: PrimaryResource>(
        &self,
        cluster: impl Into<Cluster<C>>,
    ) -> Result<Vec<Arc<K>>> {
        let cluster = cluster.into();
        let watches = self.runtime.watches.watches_of::<K>(cluster.name());
        if watches.is_empty() {
            return Err(Error::NotWatched {
                cluster: cluster.name().to_owned(),
                kind: kind_label::<K>(),
                fix: format!(
                    "no controller of this manager watches it there: declare it with `watches({}, ..)` \
                     in one",
                    K::kind(&())
                ),
            });
        }
        Ok(watches.iter().flat_map(|w| w.store().state()).collect())
    }

    /// Every cluster of the manager — its contexts, then the members of the fleet — by name, with its
    /// readiness as `/readyz` reports it now.
    pub fn clusters(&self) -> BTreeMap<String, ClusterReport> {
        self.runtime.readiness.report().clusters
    }

    /// Whether `name` is a cluster of the manager now: one of its contexts, or a member that joined and is
    /// not leaving.
    pub fn has_cluster(&self, name: &str) -> bool {
        self.runtime.readiness.knows(name) || self.runtime.members.is_current(name)
    }

    /// The members of the fleet now (clusters that joined at run time and are not leaving), in name order.
    pub fn members(&self) -> Vec<Member> {
        let names = self.runtime.members.names();
        names.into_iter().map(Member::new).collect()
    }
}
