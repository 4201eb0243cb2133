//! One controller, wired: its watches feed the executor with requests keyed by (context, object); a child's
//! change becomes a request for its parent; the engine reconciles each; the orphan sweep runs beside.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::engine::{ChildWatch, Engine, Primary, PrimaryCaches, ReconcileKey};
use super::events::EventPublisher;
use super::member_watches::{self, MEMBER_REQUESTS_WAITING};
use super::shard_watches::{PrimaryWatchKey, close_unheld, held_contexts};
use crate::controller::Reconcile;
use crate::core::Action;
use crate::core::Context;
use crate::core::Target;
use crate::core::kind_label;
use crate::executor::{self, ExecutorConfig};
use crate::ha::WORKING_FOR;
use crate::members::MemberChange;
use crate::plan::Plan;
use crate::runtime::Runtime;
use crate::watch::ChildCache;
use crate::watch::SharedWatch;

/// How many of a controller's reconciles may wait for a worker thread at once.
const MAX_WAITING_FOR_A_WORKER: usize = 64;

/// Opens (or joins) the controller's watches now, so that the health report knows every watch before the
/// manager's start returns; the returned future runs the controller until `stop` turns true, then lets the
/// reconciles in flight finish.
pub(crate) fn start<R: Reconcile>(
    reconciler: R,
    plan: Plan<R::Context>,
    runtime: Arc<Runtime>,
    stop: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let name = plan.name().to_owned();
    let mut sources = Sources::<R> {
        primaries: Vec::new(),
        children: Vec::new(),
        deferred: Vec::new(),
    };
    let primaries = PrimaryCaches::<R>::default();
    // Sharded by context: a context's primaries are watched only while this replica holds its shard.
    let by_context = runtime.shards.as_ref().is_some_and(|s| s.by_context());
    let mut deferred = Vec::new();
    for (context, namespace) in plan.watches() {
        let key = Engine::<R>::primary_key(&plan, context.name(), namespace);
        if by_context {
            deferred.push(PrimaryWatchKey { context, key });
            continue;
        }
        let Ok(client) = runtime.pool.client(context.name()) else {
            continue; // No client: the health report says why; the other contexts go on.
        };
        let watch = runtime.watches.watch::<Primary<R>>(key, client);
        sources
            .primaries
            .push((Target::Context(context), watch.clone()));
        primaries.insert(
            (Target::Context(context), namespace.map(str::to_owned)),
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
            let cache = (child.open)(&runtime.watches, context.name(), namespace, &name, client);
            sources.children.push(cache.clone());
            children.push(ChildWatch {
                context: context.name().to_owned(),
                resource: child.resource().clone(),
                cache,
            });
        }
    }
    let config = ExecutorConfig {
        concurrency: shared_plan.concurrency_limit().map(usize::from),
        debounce: shared_plan.debounce_delay().unwrap_or_default(),
        max_waiting: MAX_WAITING_FOR_A_WORKER,
        panic_retry: shared_plan.error_requeue_or_default(),
        metrics: runtime
            .metrics
            .queue(&name, shared_plan.concurrency_limit().map(usize::from)),
    };
    let contexts = shared_plan.context_list().iter().map(|c| c.name());
    runtime.metrics.controller_started(&name, contexts);
    let engine = Arc::new(Engine {
        reconciler,
        finalizer: shared_plan.managed_finalizer().map(|f| f.into_owned()),
        parent_kind: kind_label::<Primary<R>>(),
        events: EventPublisher::new(&name),
        plan: shared_plan,
        runtime,
        primaries,
        children,
        member_children: Default::default(),
        failures: std::sync::Mutex::default(),
        no_status: Default::default(),
        written_status: Default::default(),
        finalized: Default::default(),
    });
    let span = tracing::info_span!("controller", controller = %name);
    sources.deferred = deferred;
    // Subscribed now, before the manager's member provider starts: no join is missed.
    let in_members = engine.plan.has_member_children() || engine.plan.in_members();
    let members = in_members.then(|| engine.runtime.members.subscribe());
    let run = lead(engine, sources, config, stop, members);
    tracing::Instrument::instrument(run, span)
}

/// A primary's shared watch.
type PrimaryWatch<R> = Arc<SharedWatch<Primary<R>>>;

/// Where a controller's requests come from: its primaries' watches, and its children's caches (a child's
/// change is a change of its parent). Subscribed anew for each term as leader, so a new term starts with
/// every cached object.
struct Sources<R: Reconcile> {
    primaries: Vec<(Target<R::Context>, PrimaryWatch<R>)>,
    children: Vec<Arc<dyn ChildCache>>,
    /// Sharded by context: the primary watches opened while their context's shard is held.
    deferred: Vec<PrimaryWatchKey<R::Context>>,
}

impl<R: Reconcile> Sources<R> {
    fn subscribe(&self, plan: &Arc<Plan<R::Context>>) -> Vec<BoxStream<'static, ReconcileKey<R>>> {
        let mut inputs: Vec<BoxStream<'static, ReconcileKey<R>>> = Vec::new();
        for (context, watch) in &self.primaries {
            inputs.push(Engine::<R>::keys_from(watch, context.clone()).boxed());
        }
        for cache in &self.children {
            let plan = plan.clone();
            let parents = cache
                .parents()
                .filter_map(move |parent| std::future::ready(Engine::<R>::key_for(&plan, &parent)));
            inputs.push(parents.boxed());
        }
        inputs
    }
}

/// Runs the controller in terms: while this replica leads (always, without leader election) its executor
/// runs; a standby keeps the watches and caches, and reconciles everything cached the moment it leads.
async fn lead<R: Reconcile>(
    engine: Arc<Engine<R>>,
    sources: Sources<R>,
    config: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    members: Option<mpsc::Receiver<MemberChange>>,
) {
    // Follows the members for as long as the controller runs, leading or not (dropping the set ends it).
    let mut following = JoinSet::new();
    let member_requests = members.map(|changes| {
        let (requests, received) = mpsc::channel(MEMBER_REQUESTS_WAITING);
        following.spawn(member_watches::follow(engine.clone(), changes, requests));
        Arc::new(tokio::sync::Mutex::new(received))
    });
    let mut role = engine.runtime.role.clone();
    loop {
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            leads = role.wait_for(|r| r.leader) => if leads.is_err() { return },
        }
        let (end_term, term) = watch::channel(false);
        let ender = {
            let (mut stop, mut role) = (stop.clone(), role.clone());
            tokio::spawn(async move {
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
            })
        };
        let sweep = tokio::spawn(sweeps(engine.clone()));
        let mut inputs = sources.subscribe(&engine.plan);
        if let Some(requests) = &member_requests {
            inputs.push(received(requests.clone()));
        }
        if sources.deferred.is_empty() {
            inputs.extend(taken_over(&engine, &sources));
        } else {
            inputs.push(held_contexts(engine.clone(), sources.deferred.clone()));
        }
        let inputs = stream::select_all(inputs);
        executor::run(inputs, config.clone(), term, work(&engine)).await;
        sweep.abort();
        ender.abort();
        close_unheld(&engine, &sources.deferred);
        if *stop.borrow() {
            return;
        }
        tracing::info!("no longer the leader: standing by, watches kept");
    }
}

/// The requests for parents the members' changes cause, for one term (the receiver outlives terms).
fn received<R: Reconcile>(
    requests: Arc<tokio::sync::Mutex<mpsc::Receiver<ReconcileKey<R>>>>,
) -> BoxStream<'static, ReconcileKey<R>> {
    let next = |requests: Arc<tokio::sync::Mutex<mpsc::Receiver<ReconcileKey<R>>>>| async move {
        let request = requests.lock().await.recv().await;
        request.map(|request| (request, requests))
    };
    stream::unfold(requests, next).boxed()
}

/// The orphan sweep of a term: once, and in sharded mode again whenever the shards held change (a parent
/// deleted while its shard had no owner leaves orphans only the shard's next owner may remove).
async fn sweeps<R: Reconcile>(engine: Arc<Engine<R>>) {
    let mut held = engine.runtime.shards.as_ref().map(|s| s.held());
    loop {
        engine.clone().sweep_orphans().await;
        let Some(held) = held.as_mut() else { return };
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// In sharded mode, the parents of each shard this replica takes over, when it does: their previous owner
/// may have left changes unreconciled.
fn taken_over<R: Reconcile>(
    engine: &Arc<Engine<R>>,
    sources: &Sources<R>,
) -> Option<BoxStream<'static, ReconcileKey<R>>> {
    let shards = engine.runtime.shards.clone()?;
    let mut held = shards.held();
    let before = held.borrow_and_update().clone();
    let primaries = Arc::new(sources.primaries.clone());
    let gained = stream::unfold((held, before), move |(mut held, before)| {
        let (shards, primaries) = (shards.clone(), primaries.clone());
        async move {
            held.changed().await.ok()?;
            let now = held.borrow_and_update().clone();
            let new = |shard: usize| now[shard] && !before.get(shard).copied().unwrap_or(false);
            let mut requests = Vec::new();
            for (context, watch) in primaries.iter() {
                for object in watch.store().state() {
                    let (namespace, name) = (object.namespace(), object.name_any());
                    let shard = shards.shard_of(context.name(), namespace.as_deref(), &name);
                    if shard.is_some_and(new) {
                        let object = ObjectRef::from_obj(&*object);
                        requests.push(ReconcileKey::<R> {
                            context: context.clone(),
                            object,
                        });
                    }
                }
            }
            Some((stream::iter(requests), (held, now)))
        }
    });
    Some(gained.flatten().boxed())
}

/// A reconcile of `engine`, with its panics counted where the context is known (the executor retries it).
fn work<R: Reconcile>(
    engine: &Arc<Engine<R>>,
) -> impl Fn(ReconcileKey<R>) -> BoxFuture<'static, Action> {
    let engine = engine.clone();
    move |request: ReconcileKey<R>| {
        let engine = engine.clone();
        Box::pin(async move {
            let context = request.context.clone();
            let shard = match &engine.runtime.shards {
                None => None,
                Some(shards) => {
                    let object = &request.object;
                    let namespace = object.namespace.as_deref();
                    match shards.shard_of(context.name(), namespace, &object.name) {
                        Some(shard) if shards.holds(shard) => Some(shard),
                        // Another replica's: not reconciled here. Taking its shard over enqueues it again.
                        _ => return Action::await_change(),
                    }
                }
            };
            let run = std::panic::AssertUnwindSafe(engine.clone().reconcile(request));
            let run = futures::FutureExt::catch_unwind(run);
            let ran = match shard {
                Some(shard) => WORKING_FOR.scope(shard, run).await,
                None => run.await,
            };
            match ran {
                Ok(next) => next,
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
