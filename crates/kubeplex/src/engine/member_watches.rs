//! One controller's side of a changing fleet: when a member joins, its child watches (and primary watches,
//! when the plan watches its primaries in every member) open and every parent is reconciled for it; when it
//! leaves, its children are deleted or orphaned as the policy says, and it is forgotten (the runner closes
//! its watches, which frees their caches).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::children;
use super::engine::{ChildWatch, Engine, Primary};
use crate::controller::Reconcile;
use crate::core::chain;
use crate::core::{Member, Target};
use crate::members::LeavePolicy;
use crate::members::MemberChange;
use crate::watch::SharedWatch;

/// How long a leaving member's child caches may take to list before its children are deleted from what
/// they hold (a member that does not answer cannot have its children deleted anyway).
const LIST_BEFORE_DELETE: Duration = Duration::from_secs(30);

/// Follows the fleet's members for `engine` until `changes` ends. A member's caches send their keys into
/// the current term's queue when they open, and into each later term's when it begins.
pub(super) async fn follow<R: Reconcile>(
    engine: Arc<Engine<R>>,
    mut changes: mpsc::Receiver<MemberChange>,
) {
    // Each member's orphan sweep; dropping its set aborts it.
    let mut sweeps: BTreeMap<String, JoinSet<()>> = BTreeMap::new();
    while let Some(change) = changes.recv().await {
        match change {
            MemberChange::Joined { name, client, done } => {
                // A rejoin: the runner closed the member's watches, which publish no more.
                sweeps.remove(&name);
                engine.primaries.remove_member(&name);
                let opened = open(&engine, &name, client.clone());
                engine.member_children.set(&name, opened.clone());
                let primaries = if engine.plan.in_members() {
                    open_primaries(&engine, &name, client)
                } else {
                    Vec::new()
                };
                // Known to the engine first, then subscribed: a term that begins meanwhile subscribes them
                // itself (a key sent twice waits once).
                if let Some(keys) = engine.term_keys.get() {
                    for watch in &opened {
                        engine.follow_children(&*watch.cache, keys.clone());
                    }
                    for watch in &primaries {
                        let place = Target::Member(Member::new(name.as_str()));
                        Engine::<R>::follow_primaries(watch, place, keys.clone());
                    }
                }
                // Children whose parent went while the member was away (or before it joined this
                // replica) are swept once its caches have listed; a standby leaves this to the leader.
                let mut sweep = JoinSet::new();
                if engine.runtime.role.borrow().leader {
                    let engine = engine.clone();
                    sweep.spawn(async move { engine.sweep_watches(&opened).await });
                }
                sweeps.insert(name.clone(), sweep);
                let _ = done.send(());
                tracing::info!(context = %name, "member joined: its objects are watched and every parent is reconciled for it");
                engine.queue_every_parent();
            }
            MemberChange::Left { name, policy, done } => {
                if policy == LeavePolicy::Delete {
                    delete_children(&engine, &name).await;
                }
                sweeps.remove(&name);
                engine.member_children.take(&name);
                // Its parents are no longer reconciled; their children elsewhere stay as they are (the
                // orphan sweep does not judge parents in a cluster it cannot see).
                engine.primaries.remove_member(&name);
                tracing::info!(context = %name, ?policy, "member left");
                let _ = done.send(());
                // Their status drops the member, or says its children were orphaned.
                engine.queue_every_parent();
            }
        }
    }
}

/// Opens the primary watches in member `name` (the plan's namespaces, selectors) and records them as the
/// controller's caches there.
fn open_primaries<R: Reconcile>(
    engine: &Arc<Engine<R>>,
    name: &str,
    client: Client,
) -> Vec<Arc<SharedWatch<Primary<R>>>> {
    let plan = &engine.plan;
    let mut opened = Vec::new();
    for namespace in plan.member_namespaces() {
        let key = Engine::<R>::primary_key(plan, name, namespace);
        let watch = engine
            .runtime
            .watches
            .watch::<Primary<R>>(key, client.clone());
        let place = Target::Member(Member::new(name));
        engine
            .primaries
            .insert((place, namespace.map(str::to_owned)), watch.clone());
        opened.push(watch);
    }
    opened
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
