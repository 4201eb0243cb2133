//! One controller, wired: in each term as leader its watches send keys (cluster, object) into the term's
//! key queue, a child's change as the key of its parent; the executor hands them to the engine's
//! reconcile; the orphan sweep runs beside.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;

use crate::controller::DynReconcile;
use crate::core::Action;
use crate::core::Cluster;
use crate::core::Context;
use crate::engine::engine::{ChildWatch, Engine, Primaries, Primary, ReconcileKey};
use crate::engine::intake::shard_watches::{PrimaryWatchKey, close_unheld, held_contexts};
use crate::engine::intake::{member_watches, readiness_flips};
use crate::executor::{self, ExecutorConfig, Fairness, KeySender};
use crate::members::MemberChange;
use crate::metrics::ChildrenByHealth;
use crate::plan::Dispatch;
use crate::plan::Plan;
use crate::runtime::Runtime;

/// How many of a controller's reconciles may wait for a worker thread at once.
const MAX_WAITING_FOR_A_WORKER: usize = 64;

/// How long a term's first reconciles wait for the child caches' first lists.
const FIRST_LISTS_WAIT: Duration = Duration::from_secs(2);

/// Opens (or joins) the controller's watches now, so that the readiness report knows every watch before the
/// manager's start returns; the returned future runs the controller until `stop` turns true, then lets the
/// reconciles in flight finish.
pub(crate) fn start<R: DynReconcile>(
    reconciler: R,
    plan: Plan<R::Context>,
    runtime: Arc<Runtime>,
    stop: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let name = plan.name().to_owned();
    let primaries = Primaries::<R>::default();
    // Sharded by context: a context's primaries are watched only while this replica holds its shard.
    let by_context = runtime.shards.as_ref().is_some_and(|s| s.by_context());
    let mut deferred = Vec::new();
    for (context, namespace) in plan.primary_watches() {
        let key = Engine::<R>::primary_key(&plan, context.name(), namespace);
        if by_context {
            deferred.push(PrimaryWatchKey { context, key });
            continue;
        }
        let Ok(client) = runtime.pool.client(context.name()) else {
            continue; // No client: the readiness report says why; the other contexts go on.
        };
        let watch = runtime.watches.watch::<Primary<R>>(key, client);
        primaries.insert(
            (Cluster::Context(context), namespace.map(str::to_owned)),
            watch,
        );
    }
    let shared_plan = Arc::new(plan);
    let mut children = Vec::new();
    for child in shared_plan.children() {
        for (context, namespace) in child.watches() {
            let Ok(client) = runtime.pool.client(context.name()) else {
                continue;
            };
            let (registry, rule) = (&runtime.watches, child.health);
            let cache = (child.open)(registry, context.name(), namespace, &name, client, rule);
            children.push(ChildWatch::new(
                (context.name(), namespace),
                child.resource().clone(),
                cache,
            ));
        }
    }
    let config = ExecutorConfig {
        concurrency: shared_plan.concurrency().map(usize::from),
        debounce: shared_plan.debounce().unwrap_or_default(),
        fairness: Fairness {
            fair: shared_plan.dispatch() == Dispatch::Fair,
            per_group: shared_plan.concurrency_per_cluster().map(usize::from),
        },
        max_waiting: MAX_WAITING_FOR_A_WORKER,
        panic_retry: shared_plan.error_requeue_or_default(),
        metrics: runtime
            .metrics
            .queue(&name, shared_plan.concurrency().map(usize::from)),
    };
    let contexts = shared_plan.contexts().iter().map(|c| c.name());
    runtime.metrics.controller_started(&name, contexts);
    let engine = Arc::new(Engine::new(
        reconciler,
        shared_plan,
        runtime,
        primaries,
        children,
    ));
    let watched: indexmap::IndexSet<R::Context> = (engine.plan.watched().iter())
        .flat_map(|w| w.contexts().iter().copied())
        .collect();
    for context in watched {
        if let Ok(client) = engine.runtime.pool.client(context.name()) {
            engine.open_inputs(&Cluster::Context(context), &client);
        }
    }
    if !engine.plan.children().is_empty() {
        let source: Weak<dyn ChildrenByHealth> = Arc::downgrade(&engine) as _;
        engine.runtime.metrics.report_children_health(&name, source);
    }
    let span = tracing::info_span!("controller", controller = %name);
    // Subscribed now, before the manager's member provider starts: no join is missed.
    let members = engine
        .plan
        .works_in_members()
        .then(|| engine.runtime.members.subscribe());
    let flips = (engine.plan.follows_readiness_flips()).then(|| engine.runtime.readiness.flips());
    let run = lead(engine, deferred, config, stop, members, flips);
    tracing::Instrument::instrument(run, span)
}

/// Runs the controller in terms: while this replica leads (always, without leader election) its executor
/// runs; a standby keeps the watches and caches, and reconciles everything cached the moment it leads.
/// `deferred`: sharded by context, the primary watches opened while their context's shard is held.
async fn lead<R: DynReconcile>(
    engine: Arc<Engine<R>>,
    deferred: Vec<PrimaryWatchKey<R::Context>>,
    config: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    members: Option<mpsc::Receiver<MemberChange>>,
    flips: Option<broadcast::Receiver<String>>,
) {
    // Follows the members and the clusters' readiness for as long as the controller runs, leading or not
    // (dropping the set ends them; a standby's queue_every_parent does nothing).
    let mut following = JoinSet::new();
    if let Some(changes) = members {
        following.spawn(member_watches::follow(engine.clone(), changes));
    }
    if let Some(flips) = flips {
        following.spawn(readiness_flips::follow(engine.clone(), flips));
    }
    let mut role = engine.runtime.role.clone();
    loop {
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            leads = role.wait_for(|r| r.leader) => if leads.is_err() { return },
        }
        let (end_term, term) = watch::channel(false);
        // What runs beside the executor for the term; dropping the set ends them.
        let mut beside = JoinSet::new();
        {
            let (mut stop, mut role) = (stop.clone(), role.clone());
            beside.spawn(async move {
                tokio::select! {
                    _ = stop.wait_for(|stopped| *stopped) => {}
                    // A role that can no longer change (no election) never ends the term.
                    () = async {
                        if role.wait_for(|r| !r.leader).await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    } => {}
                }
                let _ = end_term.send(true);
            });
        }
        let (keys, queue) = config.queue();
        engine.begin_term(&keys);
        beside.spawn(sweeps(engine.clone()));
        if deferred.is_empty() {
            if let Some(gained) = taken_over(&engine, keys) {
                beside.spawn(gained);
            }
        } else {
            beside.spawn(held_contexts(engine.clone(), deferred.clone(), keys));
        }
        let caches = engine.children.iter().map(|w| w.cache.ready()).collect();
        first_lists(caches, term.clone()).await;
        executor::run(queue, config.clone(), term, work(&engine)).await;
        engine.term_keys.set(None);
        drop(beside);
        close_unheld(&engine, &deferred);
        // Stopped, or the manager dropped without a shutdown: no term follows.
        if *stop.borrow() || stop.has_changed().is_err() {
            return;
        }
        tracing::info!("no longer the leader: standing by, watches kept");
    }
}

/// Waits until every child cache has handed out its first list, for at most [`FIRST_LISTS_WAIT`] and not
/// past the term's end. A parent reconciled before its children are cached finds none, reads each before
/// creating it, and is queued again when their list arrives; waiting, each parent is reconciled once at
/// start. The keys meanwhile wait in the queue, each once. A cache that cannot list (its cluster down)
/// holds the term back no longer than the bound.
async fn first_lists(caches: Vec<BoxFuture<'static, ()>>, mut term: watch::Receiver<bool>) {
    let listed = tokio::time::timeout(FIRST_LISTS_WAIT, futures::future::join_all(caches));
    tokio::select! {
        _ = listed => {}
        _ = term.wait_for(|ended| *ended) => {}
    }
}

/// The orphan sweep of a term: once, and in sharded mode again whenever the shards held change (a parent
/// deleted while its shard had no owner leaves orphans only the shard's next owner may remove).
async fn sweeps<R: DynReconcile>(engine: Arc<Engine<R>>) {
    let mut held = engine.runtime.shards.as_ref().map(|s| s.held());
    loop {
        engine.clone().sweep_orphans().await;
        let Some(held) = held.as_mut() else { return };
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// In sharded mode, the parents of each shard this replica takes over, queued when it does: their previous
/// owner may have left changes unreconciled. The shards held now are the term's start.
fn taken_over<R: DynReconcile>(
    engine: &Arc<Engine<R>>,
    keys: KeySender<ReconcileKey<R>>,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let shards = engine.runtime.shards.clone()?;
    let mut held = shards.held();
    let mut before = held.borrow_and_update().clone();
    let engine = engine.clone();
    Some(async move {
        while held.changed().await.is_ok() {
            let now = held.borrow_and_update().clone();
            let new = |shard: usize| now[shard] && !before.get(shard).copied().unwrap_or(false);
            for (context, watch) in engine.primaries.all() {
                for object in watch.store().state() {
                    let (namespace, name) = (object.namespace(), object.name_any());
                    let shard = shards.shard_of(context.name(), namespace.as_deref(), &name);
                    if shard.is_some_and(new) {
                        let object = ObjectRef::from_obj(&*object);
                        let context = context.clone();
                        if !keys.send(ReconcileKey { context, object }) {
                            return;
                        }
                    }
                }
            }
            before = now;
        }
    })
}

/// A reconcile of `engine`, with its panics counted where the cluster is known (the executor retries it).
fn work<R: DynReconcile>(
    engine: &Arc<Engine<R>>,
) -> impl Fn(ReconcileKey<R>) -> BoxFuture<'static, Action> {
    let engine = engine.clone();
    move |key: ReconcileKey<R>| {
        let engine = engine.clone();
        Box::pin(async move {
            let context = key.context.clone();
            let shard = match &engine.runtime.shards {
                None => None,
                Some(shards) => {
                    let object = &key.object;
                    let namespace = object.namespace.as_deref();
                    match shards.shard_of(context.name(), namespace, &object.name) {
                        Some(shard) if shards.holds(shard) => Some(shard),
                        // Still this replica's, its fence lapsed for a moment: nothing else queues it again.
                        Some(shard) if shards.claims(shard) => {
                            return Action::requeue(crate::ha::FENCE_LAPSE_RETRY);
                        }
                        // Another replica's: not reconciled here. Taking its shard over queues it again.
                        _ => return Action::await_change(),
                    }
                }
            };
            // Every write of the reconcile passes the fence of the parent's shard, handed down with it.
            let run = std::panic::AssertUnwindSafe(engine.clone().reconcile(key, shard));
            match futures::FutureExt::catch_unwind(run).await {
                Ok(action) => action,
                Err(panic) => {
                    let (metrics, controller) = (&engine.runtime.metrics, engine.plan.name());
                    metrics.panicked(controller, context.name());
                    metrics.retried(controller);
                    std::panic::resume_unwind(panic)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! The wait of a term's first reconciles for the child caches' first lists, in paused time.

    use std::time::Duration;

    use futures::FutureExt;
    use futures::future::BoxFuture;
    use tokio::sync::watch;
    use tokio::time::Instant;

    use super::{FIRST_LISTS_WAIT, first_lists};

    /// A cache that lists after `delay`.
    fn lists_after(delay: Duration) -> BoxFuture<'static, ()> {
        tokio::time::sleep(delay).boxed()
    }

    /// A cache that never lists (its cluster does not answer).
    fn never_lists() -> BoxFuture<'static, ()> {
        futures::future::pending().boxed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_reconciles_wait_for_the_last_cache_to_list() {
        let (_end, term) = watch::channel(false);
        let start = Instant::now();
        let caches = vec![
            lists_after(Duration::from_millis(300)),
            lists_after(Duration::from_millis(700)),
        ];
        first_lists(caches, term).await;
        assert_eq!(start.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cache_that_never_lists_holds_them_back_no_longer_than_the_bound() {
        let (_end, term) = watch::channel(false);
        let start = Instant::now();
        first_lists(vec![lists_after(Duration::ZERO), never_lists()], term).await;
        assert_eq!(start.elapsed(), FIRST_LISTS_WAIT);
        assert_eq!(FIRST_LISTS_WAIT, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_term_ends_the_wait() {
        let (end, term) = watch::channel(false);
        let start = Instant::now();
        let waiting = tokio::spawn(first_lists(vec![never_lists()], term));
        tokio::time::sleep(Duration::from_millis(100)).await;
        end.send_replace(true);
        waiting.await.expect("the wait ended");
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn no_child_cache_waits_for_nothing() {
        let (_end, term) = watch::channel(false);
        let start = Instant::now();
        first_lists(Vec::new(), term).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    /// A parent of a shard whose fence lapsed while the Lease loop still holds the shard (a renewal came late)
    /// is tried again shortly: nothing else queues it when the fence reopens. One of a shard another replica
    /// holds is left to it.
    #[tokio::test]
    async fn work_refused_by_a_lapsed_fence_of_a_shard_still_held_is_tried_again() {
        use std::sync::Arc;

        use crate::core::Action;

        use crate::engine::engine::ReconcileKey;
        use crate::engine::test_engine::{CONTROL_CLUSTER, engine, parent};
        use crate::ha::{FENCE_LAPSE_RETRY, ShardBy, ShardState};

        let (client, requests) =
            crate::testing::fake_api::client(|_, _, _| (404, serde_json::json!({})));
        let mut engine = engine(client);
        // One shard: every parent is in it. Its fence is closed (never renewed) whatever is held.
        let shards = Arc::new(ShardState::new(ShardBy::Parent(1), vec!["0".into()]));
        let mut runtime = Arc::try_unwrap(engine.runtime)
            .ok()
            .expect("the engine's runtime alone");
        runtime.shards = Some(shards.clone());
        engine.runtime = Arc::new(runtime);
        let engine = Arc::new(engine);
        let key = ReconcileKey {
            context: CONTROL_CLUSTER,
            object: kube::runtime::reflector::ObjectRef::from_obj(&parent(&[])),
        };

        shards.set_held(vec![true]);
        let action = super::work(&engine)(key.clone()).await;
        assert_eq!(action, Action::requeue(FENCE_LAPSE_RETRY));

        shards.set_held(vec![false]);
        let action = super::work(&engine)(key).await;
        assert_eq!(action, Action::await_change());
        assert!(
            requests.all().is_empty(),
            "reconciled: {:?}",
            requests.lines()
        );
    }
}
