//! One controller's side of a changing fleet: when a member joins, its child watches (and primary watches,
//! when the plan watches its primaries in every member) open and every parent is reconciled for it; when it
//! leaves, its children are deleted or orphaned as the policy says, and it is forgotten (the runner closes
//! its watches, which frees their caches).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::children;
use super::engine::{ChildWatch, Engine, Primary, ReconcileKey};
use crate::controller::Reconcile;
use crate::core::chain;
use crate::core::{Member, Target};
use crate::members::LeavePolicy;
use crate::members::MemberChange;

/// How long a leaving member's child caches may take to list before its children are deleted from what
/// they hold (a member that does not answer cannot have its children deleted anyway).
const LIST_BEFORE_DELETE: Duration = Duration::from_secs(30);

/// How many requests for parents may wait for the executor; the member's forwarders wait beyond that.
pub(super) const MEMBER_REQUESTS_WAITING: usize = 1024;

/// Follows the fleet's members for `engine` until `changes` ends; requests for parents go to `requests`,
/// which the controller's executor reads while this replica leads.
pub(super) async fn follow<R: Reconcile>(
    engine: Arc<Engine<R>>,
    mut changes: mpsc::Receiver<MemberChange>,
    requests: mpsc::Sender<ReconcileKey<R>>,
) {
    // Each member's forwarders of child changes to parent requests; dropping a set aborts them.
    let mut forwarders: BTreeMap<String, JoinSet<()>> = BTreeMap::new();
    while let Some(change) = changes.recv().await {
        match change {
            MemberChange::Joined { name, client, done } => {
                // A rejoin: the runner closed the member's watches; the old forwarders' streams ended.
                forwarders.remove(&name);
                engine.primaries.remove_member(&name);
                let opened = open(&engine, &name, client.clone());
                let mut forwarding = JoinSet::new();
                for watch in &opened {
                    forwarding.spawn(forward(engine.clone(), watch.clone(), requests.clone()));
                }
                if engine.plan.in_members() {
                    open_primaries(&engine, &name, client, &mut forwarding, &requests);
                }
                // Children whose parent went while the member was away (or before it joined this
                // replica) are swept once its caches have listed; a standby leaves this to the leader.
                if engine.runtime.role.borrow().leader {
                    let (engine, opened) = (engine.clone(), opened.clone());
                    forwarding.spawn(async move { engine.sweep_watches(&opened).await });
                }
                forwarders.insert(name.clone(), forwarding);
                engine.member_children.set(&name, opened);
                let _ = done.send(());
                tracing::info!(context = %name, "member joined: its objects are watched and every parent is reconciled for it");
                every_parent(&engine, &requests).await;
            }
            MemberChange::Left { name, policy, done } => {
                if policy == LeavePolicy::Delete {
                    delete_children(&engine, &name).await;
                }
                forwarders.remove(&name);
                engine.member_children.take(&name);
                // Its parents are no longer reconciled; their children elsewhere stay as they are (the
                // orphan sweep does not judge parents in a cluster it cannot see).
                engine.primaries.remove_member(&name);
                tracing::info!(context = %name, ?policy, "member left");
                let _ = done.send(());
                // Their status drops the member, or says its children were orphaned.
                every_parent(&engine, &requests).await;
            }
        }
    }
}

/// Opens the primary watches in member `name` (the plan's namespaces, selectors) and forwards their
/// changes as requests, every cached object first.
fn open_primaries<R: Reconcile>(
    engine: &Arc<Engine<R>>,
    name: &str,
    client: Client,
    forwarding: &mut JoinSet<()>,
    requests: &mpsc::Sender<ReconcileKey<R>>,
) {
    let plan = &engine.plan;
    for namespace in plan.member_namespaces() {
        let key = Engine::<R>::primary_key(plan, name, namespace);
        let watch = engine
            .runtime
            .watches
            .watch::<Primary<R>>(key, client.clone());
        let place = Target::Member(Member::new(name));
        engine
            .primaries
            .insert((place.clone(), namespace.map(str::to_owned)), watch.clone());
        let mut changes = Box::pin(Engine::<R>::keys_from(&watch, place));
        let (engine, requests) = (engine.clone(), requests.clone());
        forwarding.spawn(async move {
            while let Some(request) = changes.next().await {
                offer(&engine, &requests, request).await;
            }
        });
    }
}

/// Opens this controller's child watches in member `name`.
fn open<R: Reconcile>(engine: &Engine<R>, name: &str, client: Client) -> Vec<ChildWatch> {
    let (runtime, controller) = (&engine.runtime, engine.plan.name());
    let mut opened = Vec::new();
    for child in engine.plan.children().iter().filter(|c| c.in_members()) {
        for namespace in child.member_namespaces() {
            let cache = (child.open)(
                &runtime.watches,
                name,
                namespace,
                controller,
                client.clone(),
            );
            opened.push(ChildWatch {
                context: name.to_owned(),
                resource: child.resource().clone(),
                cache,
            });
        }
    }
    opened
}

/// Deletes every child this controller has in member `name`, from its caches once they have listed.
async fn delete_children<R: Reconcile>(engine: &Engine<R>, name: &str) {
    let Some(client) = engine.runtime.members.client(name) else {
        return;
    };
    let watches = engine.member_children.of(name);
    let listed = futures::future::join_all(watches.iter().map(|w| w.cache.ready()));
    if tokio::time::timeout(LIST_BEFORE_DELETE, listed)
        .await
        .is_err()
    {
        tracing::warn!(context = %name, "member left before its children could be listed: those not cached are left behind");
    }
    let (mut deleted, mut failed) = (0_usize, 0_usize);
    for watch in watches.iter() {
        for uid in watch.cache.parent_uids() {
            for child in watch.cache.children_of(&uid) {
                match children::delete(client.clone(), &watch.resource, &child).await {
                    Ok(()) => deleted += 1,
                    Err(error) => {
                        failed += 1;
                        tracing::debug!(context = %name, error = %chain(&error), "deleting a leaving member's child failed");
                    }
                }
            }
        }
    }
    let controller = engine.plan.name();
    tracing::info!(context = %name, controller, deleted, failed, "member left: its children are deleted");
}

/// Requests every parent of the controller's primary caches, so that each is reconciled for the members as
/// they are now. A standby skips this: its next term starts with every cached parent anyway.
async fn every_parent<R: Reconcile>(
    engine: &Arc<Engine<R>>,
    requests: &mpsc::Sender<ReconcileKey<R>>,
) {
    for (context, watch) in engine.primaries.all() {
        for object in watch.store().state() {
            let object = ObjectRef::from_obj(&*object);
            let context = context.clone();
            if !offer(engine, requests, ReconcileKey { context, object }).await {
                return;
            }
        }
    }
}

/// Requests the parent of each changed child in one of a member's caches.
async fn forward<R: Reconcile>(
    engine: Arc<Engine<R>>,
    watch: ChildWatch,
    requests: mpsc::Sender<ReconcileKey<R>>,
) {
    let mut parents = watch.cache.parents();
    while let Some(parent) = parents.next().await {
        if let Some(request) = Engine::<R>::key_for(&engine.plan, &parent) {
            offer(&engine, &requests, request).await;
        }
    }
}

/// Sends `request` while this replica leads; gives up when it stops leading (its next term reconciles every
/// cached parent). Whether the executor can still be reached.
async fn offer<R: Reconcile>(
    engine: &Engine<R>,
    requests: &mpsc::Sender<ReconcileKey<R>>,
    request: ReconcileKey<R>,
) -> bool {
    let mut role = engine.runtime.role.clone();
    if !role.borrow().leader {
        return true;
    }
    // A role that can no longer change (no election) never stops leading.
    let stops_leading = async {
        if role.wait_for(|r| !r.leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        sent = requests.send(request) => sent.is_ok(),
        () = stops_leading => true,
    }
}
