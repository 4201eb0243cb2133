//! One controller's side of a changing fleet: when a member joins, its child watches (and primary and
//! watched kinds' watches, when the plan watches them in every member) open and every parent is
//! reconciled for it; when it leaves, its children are deleted or orphaned as the policy says, and it is
//! forgotten (the runner closes its watches, which frees their caches).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::controller::DynReconcile;
use crate::core::chain;
use crate::core::{Cluster, Member};
use crate::engine::children::removal;
use crate::engine::engine::{CLUSTER_TIMEOUT, ChildWatch, Engine, Primary};
use crate::members::LeavePolicy;
use crate::members::{LeaveProgress, MemberChange, STANDS_BY};
use crate::watch::SharedWatch;

/// How long a leaving member's child caches may take to list before its leave is said to wait for it (one
/// that answers lists within this); it waits on until the member answers or the leave gives up on it.
const LIST_PATIENCE: Duration = Duration::from_secs(5);

/// Follows the fleet's members for `engine` until `changes` ends. A member's caches send their keys into
/// the current term's queue when they open, and into each later term's when it begins. Each member's join
/// and leave runs on its own: a member that does not answer holds back no other member's.
pub(crate) async fn follow<R: DynReconcile>(
    engine: Arc<Engine<R>>,
    mut changes: mpsc::Receiver<MemberChange>,
) {
    // Each member's wait for its caches to list (then its parents and its orphan sweep); dropping its set
    // aborts it.
    let mut listings: BTreeMap<String, JoinSet<()>> = BTreeMap::new();
    // The leaves under way (the runner sends a member's next change only once its leave has ended).
    let mut leaving: JoinSet<()> = JoinSet::new();
    loop {
        // A leave that ended is reaped at once: its task's memory (sized for the whole leave) is not kept
        // until the next change comes.
        let change = tokio::select! {
            Some(_) = leaving.join_next(), if !leaving.is_empty() => continue,
            change = changes.recv() => match change {
                Some(change) => change,
                None => break,
            },
        };
        match change {
            MemberChange::Joined { name, client, done } => {
                // A rejoin: the runner closed the member's watches, which publish no more.
                listings.remove(&name);
                engine.primaries.remove_member(&name);
                engine.inputs.remove_member(&name);
                let opened = open(&engine, &name, client.clone());
                engine.open_inputs(&Cluster::Member(Member::new(name.as_str())), &client);
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
                        let place = Cluster::Member(Member::new(name.as_str()));
                        Engine::<R>::follow_primaries(watch, place, keys.clone());
                    }
                }
                // Children go there once its caches have listed: then every parent is reconciled for it.
                // Children whose parent went while the member was away (or before it joined this replica)
                // are swept then too; a standby leaves this to the leader.
                let (listing, member) = (engine.clone(), name.clone());
                let mut waits = JoinSet::new();
                waits.spawn(async move {
                    futures::future::join_all(opened.iter().map(|w| w.cache.ready())).await;
                    listing.member_children.listed(&member);
                    tracing::debug!(cluster = %member, controller = listing.plan.name(), "member's child watches listed");
                    listing.queue_every_parent();
                    if listing.runtime.role.borrow().leader {
                        listing.sweep_watches(&opened).await;
                    }
                });
                listings.insert(name.clone(), waits);
                let _ = done.send(());
                tracing::info!(cluster = %name, "member joined: its objects are watched, and every parent is reconciled for it once they have listed");
            }
            MemberChange::Left {
                name,
                policy,
                progress,
                done,
            } => {
                listings.remove(&name);
                let engine = engine.clone();
                leaving.spawn(async move {
                    if policy == LeavePolicy::Delete {
                        delete_children(&engine, &name, &progress).await;
                    }
                    engine.member_children.take(&name);
                    // Its parents are no longer reconciled; their children elsewhere stay as they are (the
                    // orphan sweep does not judge parents in a cluster it cannot see).
                    engine.primaries.remove_member(&name);
                    engine.inputs.remove_member(&name);
                    tracing::info!(cluster = %name, ?policy, "member left");
                    let forgotten = progress.forgotten();
                    drop(progress);
                    let _ = done.send(());
                    // Their status drops the member, or says its children were orphaned: once no
                    // controller's part holds the leave, so that no reconcile still finds it leaving.
                    forgotten.await;
                    engine.events.forget(&name);
                    engine.told_leaves.forget(&name);
                    engine.queue_every_parent();
                });
            }
        }
    }
}

/// Opens the primary watches in member `name` (the plan's namespaces, selectors) and records them as the
/// controller's caches there.
fn open_primaries<R: DynReconcile>(
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
        let place = Cluster::Member(Member::new(name));
        engine
            .primaries
            .insert((place, namespace.map(str::to_owned)), watch.clone());
        opened.push(watch);
    }
    opened
}

/// Opens this controller's child watches in member `name`.
fn open<R: DynReconcile>(engine: &Engine<R>, name: &str, client: Client) -> Vec<ChildWatch> {
    let (runtime, controller) = (&engine.runtime, engine.plan.name());
    let mut opened = Vec::new();
    let default = client.default_namespace().to_owned();
    for child in engine.plan.children().iter().filter(|c| c.in_members()) {
        for namespace in child.member_namespaces(&default) {
            let cache = (child.open)(
                &runtime.watches,
                name,
                namespace,
                controller,
                client.clone(),
                child.health,
            );
            opened.push(ChildWatch::new(
                (name, namespace),
                child.resource().clone(),
                cache,
            ));
        }
    }
    opened
}

/// Deletes every child this controller has in member `name`, from its caches once they have listed. A
/// member that does not answer (its caches do not list, or a deletion fails) makes the leave wait, said in
/// `progress` (so in `/readyz` and, through a reconcile of every parent, in their status), trying again
/// until it answers, or until the leave gives up: its children there are then abandoned. A replica whose
/// fence is closed (a standby) sends no delete: it waits until its caches show the children gone (the
/// leader deleted them) or until it may write.
async fn delete_children<R: DynReconcile>(
    engine: &Arc<Engine<R>>,
    name: &str,
    progress: &LeaveProgress,
) {
    let Some(client) = engine.runtime.members.client(name) else {
        return;
    };
    let controller = engine.plan.name();
    let watches = engine.member_children.of(name);
    let mut role = engine.runtime.role.clone();
    let mut waited = false;
    loop {
        let listed = futures::future::join_all(watches.iter().map(|w| w.cache.ready()));
        let leads = role.borrow().leader;
        let problem = match tokio::time::timeout(LIST_PATIENCE, listed).await {
            Err(_) => {
                let health = engine.runtime.readiness.report();
                let reasons = health.clusters.get(name).map(|c| c.reasons.clone());
                let why = reasons.and_then(|r| r.into_iter().next());
                Some(why.unwrap_or_else(|| "its children are not listed yet".to_owned()))
            }
            Ok(_) if !leads && cached(&watches) > 0 => None,
            Ok(_) => match delete_cached(&client, caught_up(&watches).await, controller).await {
                Ok(deleted) => {
                    if waited {
                        progress.answered(controller);
                    }
                    tracing::info!(cluster = %name, controller, deleted, "member left: its children are deleted");
                    return;
                }
                Err(problem) => Some(problem),
            },
        };
        match &problem {
            Some(problem) => progress.waits(controller, problem.clone()),
            None => progress.waits_for_the_leader(controller),
        }
        if !std::mem::replace(&mut waited, true) {
            engine.queue_every_parent(); // Their status says the member is leaving, and why.
        }
        let again = tokio::time::Instant::now() + LIST_PATIENCE;
        let give_up = progress.give_up_at();
        let next = tokio::time::sleep_until(give_up.map_or(again, |at| at.min(again)));
        // A standby tries at once when it becomes the leader.
        let leading = async {
            if leads || role.wait_for(|r| r.leader).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = next => {}
            () = leading => {}
        }
        if give_up.is_some_and(|at| tokio::time::Instant::now() >= at) {
            let problem = problem.unwrap_or_else(|| STANDS_BY.to_owned());
            let after = progress.give_up_after().unwrap_or_default();
            let reason = format!(
                "member {name}'s children could not be deleted within {after:?} of its leave: they were left behind ({problem})"
            );
            tracing::warn!(cluster = %name, controller, %problem, "giving up on a leaving member whose children cannot be deleted: they are abandoned");
            progress.abandon(controller, reason);
            return;
        }
    }
}

/// `watches`, once their caches hold every child this controller's applies put there, or after
/// [`LIST_PATIENCE`] (a child deleted meanwhile by someone else is never cached): a leave right after a
/// join must not miss the children whose watch events have not arrived yet.
async fn caught_up(watches: &[ChildWatch]) -> &[ChildWatch] {
    let deadline = tokio::time::Instant::now() + LIST_PATIENCE;
    // A child applied through one watch of its kind may be cached by another (another namespace's).
    let delivered = || {
        let pending: Vec<String> = watches.iter().flat_map(|w| w.answered.uids()).collect();
        pending.is_empty() || {
            let cached: std::collections::HashSet<String> =
                watches.iter().flat_map(|w| w.cache.uids()).collect();
            pending.iter().all(|uid| cached.contains(uid))
        }
    };
    while !delivered() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(CATCH_UP_POLL).await;
    }
    watches
}

/// How often a leave looks whether the caches have caught up with the applies.
const CATCH_UP_POLL: Duration = Duration::from_millis(20);

/// How many children `watches`' caches hold.
fn cached(watches: &[ChildWatch]) -> usize {
    let per_parent = watches.iter().flat_map(|w| {
        let cache = &w.cache;
        cache
            .parent_uids()
            .into_iter()
            .map(|uid| cache.children_of(&uid).len())
    });
    per_parent.sum()
}

/// Deletes the children in `watches`' caches (unlinks those whose delete policy orphans them); how many,
/// or why one could not be (the member does not answer, or refuses), each attempt bounded so that a member
/// that stopped answering is told soon.
async fn delete_cached(
    client: &Client,
    watches: &[ChildWatch],
    controller: &str,
) -> Result<usize, String> {
    let mut deleted = 0_usize;
    for watch in watches {
        for uid in watch.cache.parent_uids() {
            for child in watch.cache.children_of(&uid) {
                let deletion = removal::remove(client.clone(), &watch.resource, &child, controller);
                let what = format!(
                    "deleting {} {}",
                    watch.resource.kind,
                    child.name.as_deref().unwrap_or("")
                );
                match tokio::time::timeout(CLUSTER_TIMEOUT, deletion).await {
                    Ok(Ok(_)) => deleted += 1,
                    Ok(Err(error)) => {
                        return Err(format!("{what} failed: {}", chain(&error)));
                    }
                    Err(_) => {
                        return Err(format!("{what}: no answer within {CLUSTER_TIMEOUT:?}"));
                    }
                }
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests;
