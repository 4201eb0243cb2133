//! What the rest of the runtime sees of sharded mode: which shard a parent is in, whether this replica owns
//! it now, and clients whose writes pass only while it does.
//!
//! Ownership is checked twice: before a reconcile starts (a parent of a shard this replica does not own is
//! not reconciled) and on every write, in a fence of the shard's own in front of the client the reconcile
//! uses and again at the socket (the write goes over connections whose bytes pass the shard's fence) — so a
//! reconcile that was running when the shard moved, or a process stopped mid-write, writes nothing after its
//! deadline.

use std::collections::HashMap;

use hyper::http::Request;
use kube::Client;
use kube::client::Body;
use parking_lot::Mutex;
use tokio::sync::watch;
use tower::Layer;

use super::rendezvous::ShardBy;
use crate::client::{AlsoFencedBy, Fence, NOT_THE_SHARD_OWNER};
use crate::core::Shrink;

/// How soon work refused by a fence that lapsed while this replica still holds it (as leader, or the
/// shard's owner) is tried again: nothing else queues it when the fence reopens, since what is held does
/// not change. A replica that really lost the fence finds so then, and leaves the work to the new holder.
pub(crate) const FENCE_LAPSE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The shards of a sharded manager, and this replica's hold on each.
pub(crate) struct ShardState {
    by: ShardBy,
    /// Each shard's name (its number, or its context).
    names: Vec<String>,
    /// Each shard's fence: open until the deadline of this replica's last renewal of its Lease.
    fences: Vec<Fence>,
    /// Which shards this replica holds, as the Lease loop last decided.
    held: watch::Sender<Vec<bool>>,
    /// Clients fenced by a shard, per (shard, cluster), built once.
    clients: Mutex<HashMap<(usize, String), Client>>,
}

impl ShardState {
    pub(crate) fn new(by: ShardBy, names: Vec<String>) -> Self {
        let fences = names
            .iter()
            .map(|_| Fence::closed_saying(NOT_THE_SHARD_OWNER))
            .collect();
        let (held, _) = watch::channel(vec![false; names.len()]);
        Self {
            by,
            names,
            fences,
            held,
            clients: Mutex::default(),
        }
    }

    /// Whether the shards are contexts (whose primary watches come and go with them).
    pub(crate) fn by_context(&self) -> bool {
        self.by == ShardBy::Context
    }

    /// The shards' names.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The fence of shard `shard`.
    pub(crate) fn fence(&self, shard: usize) -> &Fence {
        &self.fences[shard]
    }

    /// The shard of the parent `namespace/name` in `context`; `None` for a context that is no shard.
    pub(crate) fn shard_of(
        &self,
        context: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<usize> {
        match self.by {
            ShardBy::Parent(_) => Some(super::rendezvous::of_parent(
                namespace,
                name,
                self.names.len(),
            )),
            ShardBy::Context => self.names.iter().position(|n| n == context),
        }
    }

    /// Whether this replica holds the shard of `context` (sharded by context) now.
    pub(crate) fn holds_context(&self, context: &str) -> bool {
        self.names
            .iter()
            .position(|n| n == context)
            .is_some_and(|shard| self.holds(shard))
    }

    /// Whether this replica may work on shard `shard` now.
    pub(crate) fn holds(&self, shard: usize) -> bool {
        self.fences.get(shard).is_some_and(Fence::allows_writes)
    }

    /// Whether the Lease loop holds shard `shard`, as it last decided: its fence may have lapsed for a
    /// moment (a renewal came late) while the shard is still this replica's.
    pub(crate) fn claims(&self, shard: usize) -> bool {
        self.held.borrow().get(shard).copied().unwrap_or(false)
    }

    /// Records which shards are held, waking whoever waits for new ones.
    pub(crate) fn set_held(&self, held: Vec<bool>) {
        self.held.send_if_modified(|current| {
            let changed = *current != held;
            *current = held;
            changed
        });
    }

    /// The held shards, as they change.
    pub(crate) fn held(&self) -> watch::Receiver<Vec<bool>> {
        self.held.subscribe()
    }

    /// `base` (the client of `context`), its writes fenced by shard `shard` as well.
    pub(crate) fn fenced_client(&self, shard: usize, context: &str, base: Client) -> Client {
        let mut clients = self.clients.lock();
        clients
            .entry((shard, context.to_owned()))
            .or_insert_with(|| {
                let namespace = base.default_namespace().to_owned();
                let fence = self.fences[shard].clone();
                // The shard's fence rides with each request down to the base client's write connections:
                // there its writes go over connections of their own whose bytes pass this fence as well.
                let send = tower::service_fn(move |mut request: Request<Body>| {
                    let base = base.clone();
                    request.extensions_mut().insert(AlsoFencedBy(fence.clone()));
                    async move { base.send(request).await }
                });
                Client::new(self.fences[shard].layer(send), namespace)
            })
            .clone()
    }

    /// Drops the shard clients of `context`: a member that left, or whose credentials changed, is reached
    /// through its new client from now on, and its old one is freed.
    pub(crate) fn forget(&self, context: &str) {
        let mut clients = self.clients.lock();
        clients.retain(|(_, of), _| of != context);
        clients.shrink_when_sparse();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    #[test]
    fn parents_fall_in_shards_by_hash_or_by_context() {
        let by_parent =
            ShardState::new(ShardBy::Parent(4), (0..4).map(|i| i.to_string()).collect());
        let shard = by_parent.shard_of("any", Some("apps"), "web").unwrap();
        assert!(shard < 4);
        assert_eq!(
            by_parent.shard_of("other", Some("apps"), "web"),
            Some(shard)
        );
        let by_context = ShardState::new(ShardBy::Context, vec!["a".into(), "b".into()]);
        assert_eq!(by_context.shard_of("b", Some("apps"), "web"), Some(1));
        assert_eq!(by_context.shard_of("c", Some("apps"), "web"), None);
    }

    #[test]
    fn a_shard_is_held_while_its_fence_is_open() {
        let state = ShardState::new(ShardBy::Parent(2), vec!["0".into(), "1".into()]);
        assert!(!state.holds(0) && !state.holds(1) && !state.holds(7));
        state
            .fence(1)
            .open_for(Instant::now(), Duration::from_secs(30));
        assert!(state.holds(1) && !state.holds(0));
        state.fence(1).close();
        assert!(!state.holds(1));
    }

    #[tokio::test]
    async fn a_shard_client_writes_only_while_its_shard_is_held() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, DeleteParams};

        let (base, requests) = crate::testing::fake_api::client(|_, _, _| {
            (
                200,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            )
        });
        let state = ShardState::new(ShardBy::Parent(2), vec!["0".into(), "1".into()]);
        let api: Api<ConfigMap> =
            Api::namespaced(state.fenced_client(1, "control", base.clone()), "apps");
        let refused = api
            .delete("web", &DeleteParams::default())
            .await
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("not the owner of this parent's shard"),
            "{refused}"
        );
        // Reads pass (the answer is no ConfigMap, which does not matter here); the refused write was not sent.
        let _ = api.get_opt("web").await;
        assert_eq!(
            requests.lines(),
            ["GET /api/v1/namespaces/apps/configmaps/web"]
        );
        let reads = 1;

        state
            .fence(1)
            .open_for(Instant::now(), Duration::from_secs(30));
        let _ = api.delete("web", &DeleteParams::default()).await;
        assert_eq!(
            requests.all().len(),
            reads + 1,
            "the write was sent once the shard was held"
        );
        // Another shard's fence does not open this one's client, and the client is built once.
        state.fence(1).close();
        state
            .fence(0)
            .open_for(Instant::now(), Duration::from_secs(30));
        let again: Api<ConfigMap> =
            Api::namespaced(state.fenced_client(1, "control", base), "apps");
        assert!(again.delete("web", &DeleteParams::default()).await.is_err());
        assert_eq!(requests.all().len(), reads + 1);
    }

    #[tokio::test]
    async fn a_forgotten_context_is_reached_through_its_new_client() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::Api;

        let answer =
            |_: &_, _: &_, _: &_| (404, serde_json::json!({"kind": "Status", "code": 404}));
        let (old, to_old) = crate::testing::fake_api::client(answer);
        let (new, to_new) = crate::testing::fake_api::client(answer);
        let state = ShardState::new(ShardBy::Parent(2), vec!["0".into(), "1".into()]);
        let read = |client| async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "apps");
            let _ = api.get_opt("web").await;
        };
        read(state.fenced_client(1, "member-a", old.clone())).await;
        read(state.fenced_client(1, "member-a", new.clone())).await;
        assert_eq!((to_old.all().len(), to_new.all().len()), (2, 0), "cached");
        state.forget("member-b");
        read(state.fenced_client(1, "member-a", new.clone())).await;
        assert_eq!(to_old.all().len(), 3, "another context's leave keeps it");

        state.forget("member-a");
        read(state.fenced_client(1, "member-a", new)).await;
        assert_eq!((to_old.all().len(), to_new.all().len()), (3, 1));
    }
}
