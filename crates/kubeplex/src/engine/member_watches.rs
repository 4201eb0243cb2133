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
use super::engine::{CONTEXT_TIMEOUT, ChildWatch, Engine, Primary, Request};
use crate::controller::Reconcile;
use crate::core::chain;
use crate::core::{Member, Target};
use crate::members::LeavePolicy;
use crate::members::{LeaveProgress, MemberChange};

/// How long a leaving member's child caches may take to list before its leave is said to wait for it (one
/// that answers lists within this); it waits on until the member answers or the leave gives up on it.
const LIST_PATIENCE: Duration = Duration::from_secs(5);

/// How many requests for parents may wait for the executor; the member's forwarders wait beyond that.
pub(super) const MEMBER_REQUESTS_WAITING: usize = 1024;

/// Follows the fleet's members for `engine` until `changes` ends; requests for parents go to `requests`,
/// which the controller's executor reads while this replica leads. Each member's join and leave runs on its
/// own: a member that does not answer holds back no other member's.
pub(super) async fn follow<R: Reconcile>(
    engine: Arc<Engine<R>>,
    mut changes: mpsc::Receiver<MemberChange>,
    requests: mpsc::Sender<Request<R>>,
) {
    // Each member's forwarders of child changes to parent requests; dropping a set aborts them.
    let mut forwarders: BTreeMap<String, JoinSet<()>> = BTreeMap::new();
    // The leaves under way (the runner sends a member's next change only once its leave has ended).
    let mut leaving: JoinSet<()> = JoinSet::new();
    while let Some(change) = changes.recv().await {
        while leaving.try_join_next().is_some() {}
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
                // Children go there once its caches have listed: then every parent is reconciled for it.
                // Children whose parent went while the member was away (or before it joined this replica)
                // are swept then too; a standby leaves this to the leader.
                let (listing, member, to) = (engine.clone(), name.clone(), requests.clone());
                let watches = opened.clone();
                forwarding.spawn(async move {
                    futures::future::join_all(watches.iter().map(|w| w.cache.ready())).await;
                    listing.member_children.listed(&member);
                    tracing::debug!(context = %member, controller = listing.plan.name(), "member's child watches listed");
                    every_parent(&listing, &to).await;
                    if listing.runtime.role.borrow().leader {
                        listing.sweep_watches(&watches).await;
                    }
                });
                forwarders.insert(name.clone(), forwarding);
                engine.member_children.set(&name, opened);
                let _ = done.send(());
                tracing::info!(context = %name, "member joined: its objects are watched, and every parent is reconciled for it once they have listed");
            }
            MemberChange::Left {
                name,
                policy,
                progress,
                done,
            } => {
                // Its changes no longer reconcile parents.
                forwarders.remove(&name);
                let (engine, requests) = (engine.clone(), requests.clone());
                leaving.spawn(async move {
                    if policy == LeavePolicy::Delete {
                        delete_children(&engine, &name, &progress, &requests).await;
                    }
                    engine.member_children.take(&name);
                    // Its parents are no longer reconciled; their children elsewhere stay as they are (the
                    // orphan sweep does not judge parents in a cluster it cannot see).
                    engine.primaries.remove_member(&name);
                    tracing::info!(context = %name, ?policy, "member left");
                    let _ = done.send(());
                    // Their status drops the member, or says its children were orphaned.
                    every_parent(&engine, &requests).await;
                });
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
    requests: &mpsc::Sender<Request<R>>,
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
        let mut changes = Box::pin(Engine::<R>::requests_from(&watch, place));
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

/// Deletes every child this controller has in member `name`, from its caches once they have listed. A
/// member that does not answer (its caches do not list, or a deletion fails) makes the leave wait, said in
/// `progress` (so in `/readyz` and, through a reconcile of every parent, in their status), trying again
/// until it answers, or until the leave gives up: its children there are then abandoned.
async fn delete_children<R: Reconcile>(
    engine: &Arc<Engine<R>>,
    name: &str,
    progress: &LeaveProgress,
    requests: &mpsc::Sender<Request<R>>,
) {
    let Some(client) = engine.runtime.members.client(name) else {
        return;
    };
    let controller = engine.plan.name();
    let watches = engine.member_children.of(name);
    let mut waited = false;
    loop {
        let listed = futures::future::join_all(watches.iter().map(|w| w.cache.ready()));
        let problem = match tokio::time::timeout(LIST_PATIENCE, listed).await {
            Err(_) => {
                let health = engine.runtime.health.report();
                let reasons = health.contexts.get(name).map(|c| c.reasons.clone());
                let why = reasons.and_then(|r| r.into_iter().next());
                why.unwrap_or_else(|| format!("context {name}: its children are not listed yet"))
            }
            Ok(_) => match delete_cached(&client, name, &watches).await {
                Ok(deleted) => {
                    if waited {
                        progress.answered(controller);
                    }
                    tracing::info!(context = %name, controller, deleted, "member left: its children are deleted");
                    return;
                }
                Err(problem) => problem,
            },
        };
        progress.waits(controller, problem.clone());
        if !std::mem::replace(&mut waited, true) {
            every_parent(engine, requests).await; // Their status says the member is leaving, and why.
        }
        let again = tokio::time::Instant::now() + LIST_PATIENCE;
        let give_up = progress.give_up_at();
        tokio::time::sleep_until(give_up.map_or(again, |at| at.min(again))).await;
        if give_up.is_some_and(|at| tokio::time::Instant::now() >= at) {
            let after = progress.give_up_after().unwrap_or_default();
            let reason = format!(
                "member {name} did not answer within {after:?} of its leave: its children there were left behind ({problem})"
            );
            tracing::warn!(context = %name, controller, %problem, "giving up on a leaving member that does not answer: its children there are abandoned");
            progress.abandon(controller, reason);
            return;
        }
    }
}

/// Deletes the children in `watches`' caches; how many, or why one could not be (the member does not
/// answer, or refuses), each attempt bounded so that a member that stopped answering is told soon.
async fn delete_cached(
    client: &Client,
    name: &str,
    watches: &[ChildWatch],
) -> Result<usize, String> {
    let mut deleted = 0_usize;
    for watch in watches {
        for uid in watch.cache.parent_uids() {
            for child in watch.cache.children_of(&uid) {
                let deletion = children::delete(client.clone(), &watch.resource, &child);
                let what = format!(
                    "deleting {} {}",
                    watch.resource.kind,
                    child.name.as_deref().unwrap_or("")
                );
                match tokio::time::timeout(CONTEXT_TIMEOUT, deletion).await {
                    Ok(Ok(())) => deleted += 1,
                    Ok(Err(error)) => {
                        return Err(format!("context {name}: {what} failed: {}", chain(&error)));
                    }
                    Err(_) => {
                        return Err(format!(
                            "context {name}: {what}: no answer within {CONTEXT_TIMEOUT:?}"
                        ));
                    }
                }
            }
        }
    }
    Ok(deleted)
}

/// Requests every parent of the controller's primary caches, so that each is reconciled for the members as
/// they are now. A standby skips this: its next term starts with every cached parent anyway.
async fn every_parent<R: Reconcile>(engine: &Arc<Engine<R>>, requests: &mpsc::Sender<Request<R>>) {
    for (context, watch) in engine.primaries.all() {
        for object in watch.store().state() {
            let object = ObjectRef::from_obj(&*object);
            let context = context.clone();
            if !offer(engine, requests, Request { context, object }).await {
                return;
            }
        }
    }
}

/// Requests the parent of each changed child in one of a member's caches.
async fn forward<R: Reconcile>(
    engine: Arc<Engine<R>>,
    watch: ChildWatch,
    requests: mpsc::Sender<Request<R>>,
) {
    let mut parents = watch.cache.parents();
    while let Some(parent) = parents.next().await {
        if let Some(request) = Engine::<R>::request_for(&engine.plan, &parent) {
            offer(&engine, &requests, request).await;
        }
    }
}

/// Sends `request` while this replica leads; gives up when it stops leading (its next term reconciles every
/// cached parent). Whether the executor can still be reached.
async fn offer<R: Reconcile>(
    engine: &Engine<R>,
    requests: &mpsc::Sender<Request<R>>,
    request: Request<R>,
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
