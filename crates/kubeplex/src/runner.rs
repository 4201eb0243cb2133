//! One controller's loop: its watches feed a queue keyed by (context, object); reconciles run from it, and
//! after each the children are synced in every context and the parent's status records the outcome.
//!
//! kube-runtime's scheduler does the queueing (one entry per key, the earliest time wins, optional
//! debounce); this loop adds the context to the key, the concurrency limit, one reconcile per key at a
//! time, requeues, the finalizer, and a graceful stop.

use std::any::TypeId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::stream::{self, BoxStream, FuturesUnordered, StreamExt};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::children::{self, ChildWatch, DesiredChild, Parentage};
use crate::context::Context;
use crate::controller::{Controller, DEFAULT_ERROR_REQUEUE, Reconcile};
use crate::cx::Cx;
use crate::health::chain;
use crate::ownership::{ParentRef, kind_label};
use crate::plan::Plan;
use crate::runtime::Runtime;
use crate::scope::ApiScope;
use crate::status::{ClusterState, FleetStatus, Outcome, now};
use crate::watches::{Change, SharedWatch, WatchKey, receiver_stream};

type Primary<R> = <R as Controller>::Resource;

/// How long syncing or cleaning up one context may take before it counts as unreachable, so that a hung
/// cluster delays only its own status.
const CONTEXT_TIMEOUT: Duration = Duration::from_secs(15);

/// A reconcile request: the same namespace/name in two contexts are two requests.
#[derive(Debug)]
struct Request<R: Controller> {
    context: R::Context,
    object: ObjectRef<Primary<R>>,
}

// Derives would demand `R: Clone + Eq + Hash`; only the fields need to be.
impl<R: Controller> Clone for Request<R> {
    fn clone(&self) -> Self {
        Self {
            context: self.context,
            object: self.object.clone(),
        }
    }
}
impl<R: Controller> PartialEq for Request<R> {
    fn eq(&self, other: &Self) -> bool {
        self.context == other.context && self.object == other.object
    }
}
impl<R: Controller> Eq for Request<R> {}
impl<R: Controller> std::hash::Hash for Request<R> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.context.hash(state);
        self.object.hash(state);
    }
}

/// What the loop does next.
enum Step<R: Controller> {
    Stop,
    Finished(Request<R>, Option<Duration>),
    Start(Request<R>),
}

/// Primary caches by (context, namespace); `None` is the all-namespaces watch.
type PrimaryCaches<R> =
    HashMap<(<R as Controller>::Context, Option<String>), Arc<SharedWatch<Primary<R>>>>;

/// Everything a reconcile of this controller needs, shared by its reconciles.
struct Job<R: Reconcile> {
    reconciler: R,
    plan: Arc<Plan<R::Context>>,
    runtime: Arc<Runtime>,
    primaries: PrimaryCaches<R>,
    children: Vec<ChildWatch>,
    finalizer: Option<String>,
    parent_kind: String,
    error_requeue: Duration,
    /// Consecutive failed reconciles per object, for the default error policy's backoff.
    failures: std::sync::Mutex<HashMap<Request<R>, u32>>,
    /// One event recorder per context, so that repeated events become one series, not many events.
    recorders: std::sync::Mutex<HashMap<R::Context, Recorder>>,
}

/// Opens (or joins) the controller's watches now, so that the health report knows every watch before the
/// manager's start returns; the returned future runs the loop until `stop` turns true, then lets the
/// reconciles in flight finish.
pub(crate) fn start<R: Reconcile>(
    reconciler: R,
    plan: Plan<R::Context>,
    runtime: Arc<Runtime>,
    stop: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let name = plan.name().to_owned();
    let mut inputs: Vec<BoxStream<'static, Request<R>>> = Vec::new();
    let mut primaries = HashMap::new();
    for (context, namespace) in plan.watches() {
        let Ok(client) = runtime.pool.client(context.name()) else {
            continue; // No client: the health report says why; the other contexts go on.
        };
        let key = WatchKey {
            context: context.name().to_owned(),
            kind: TypeId::of::<Primary<R>>(),
            namespace: namespace.map(str::to_owned),
            label_selector: plan.label_selector_value().map(str::to_owned),
            field_selector: plan.field_selector_value().map(str::to_owned),
        };
        let watch = runtime.watches.watch::<Primary<R>>(key, client);
        let changes = receiver_stream(watch.subscribe()).map(move |change| {
            let object = match change {
                Change::Applied(object) | Change::Deleted(object) => object,
            };
            Request::<R> {
                context,
                object: ObjectRef::from_obj(&object),
            }
        });
        inputs.push(changes.boxed());
        primaries.insert((context, namespace.map(str::to_owned)), watch);
    }
    let mut children = Vec::new();
    for child in plan.children() {
        for (context, namespace) in child.watches() {
            let Ok(client) = runtime.pool.client(context.name()) else {
                continue;
            };
            let cache = (child.open)(&runtime.watches, context.name(), namespace, &name, client);
            let primary_contexts = plan.context_list().to_vec();
            // A child's change is a change of its parent: map it back through the stamped reference.
            let parents = cache.changes().filter_map(move |meta| {
                let parent = ParentRef::of(&meta).and_then(|parent| {
                    let context = *primary_contexts
                        .iter()
                        .find(|c| c.name() == parent.context)?;
                    let object = ObjectRef::new(&parent.name);
                    let object = match &parent.namespace {
                        Some(namespace) => object.within(namespace),
                        None => object,
                    };
                    Some(Request::<R> { context, object })
                });
                std::future::ready(parent)
            });
            inputs.push(parents.boxed());
            children.push(ChildWatch {
                context: context.name().to_owned(),
                resource: child.resource().clone(),
                cache,
            });
        }
    }
    let job = Arc::new(Job {
        reconciler,
        finalizer: plan.managed_finalizer().map(|f| f.into_owned()),
        parent_kind: kind_label(
            &Primary::<R>::kind(&()),
            &Primary::<R>::group(&()),
            &Primary::<R>::version(&()),
        ),
        error_requeue: plan.error_requeue_delay().unwrap_or(DEFAULT_ERROR_REQUEUE),
        plan: Arc::new(plan),
        runtime,
        primaries,
        children,
        recorders: std::sync::Mutex::default(),
        failures: std::sync::Mutex::default(),
    });
    run(job, stop, inputs)
}

/// How many of a controller's reconciles may wait for a worker thread at once (see `run`).
const MAX_WAITING_FOR_A_WORKER: usize = 64;

async fn run<R: Reconcile>(
    job: Arc<Job<R>>,
    mut stop: watch::Receiver<bool>,
    inputs: Vec<BoxStream<'static, Request<R>>>,
) {
    let sweep = tokio::spawn(job.clone().sweep_orphans());
    let (requeue, requeued) = mpsc::unbounded_channel::<ScheduleRequest<Request<R>>>();
    let now = |message| ScheduleRequest {
        message,
        run_at: Instant::now(),
    };
    let requests = stream::select(
        stream::select_all(inputs).map(now),
        receiver_stream(requeued),
    );
    let scheduler = debounced_scheduler(
        requests,
        job.plan.debounce_delay().unwrap_or(Duration::ZERO),
    );
    futures::pin_mut!(scheduler);

    let limit = job.plan.concurrency_limit().map(usize::from);
    // Reconciles spawned but not yet picked up by a worker. Without a bound, a burst of ready keys (every
    // object at startup, with unbounded concurrency) would allocate every task before any runs: each holds
    // its reconcile future, so the burst's peak memory would grow with the number of objects.
    let waiting_for_a_worker = Arc::new(Semaphore::new(MAX_WAITING_FOR_A_WORKER));
    let mut running: HashSet<Request<R>> = HashSet::new();
    let mut in_flight = FuturesUnordered::new();
    loop {
        let has_room = limit.is_none_or(|limit| in_flight.len() < limit);
        let step = {
            // A key being reconciled stays in the scheduler until its reconcile ends.
            let mut ready = scheduler.as_mut().hold_unless(|r| !running.contains(r));
            tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => Step::Stop,
                Some((request, next)) = in_flight.next(), if !in_flight.is_empty() => Step::Finished(request, next),
                Some(request) = ready.next(), if has_room => Step::Start(request),
                else => Step::Stop,
            }
        };
        match step {
            Step::Stop => break,
            Step::Finished(request, next) => {
                running.remove(&request);
                // A burst leaves the set with room for every key it held: give it back once it drains.
                if running.capacity() > 64 && running.len() < running.capacity() / 4 {
                    running.shrink_to(running.len() * 2);
                }
                if let Some(delay) = next {
                    let _ = requeue.send(ScheduleRequest {
                        message: request,
                        run_at: Instant::now() + delay,
                    });
                }
            }
            Step::Start(request) => {
                running.insert(request.clone());
                // Each reconcile is a task of its own: reconciles of one controller use every core, and a
                // panicking reconcile fails its request (retried later), not the controller.
                let pending = waiting_for_a_worker
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed");
                let task = tokio::spawn({
                    let (job, request) = (job.clone(), request.clone());
                    async move {
                        drop(pending);
                        job.reconcile(request).await
                    }
                });
                let retry = job.error_requeue;
                in_flight.push(async move {
                    task.await.unwrap_or_else(|panic| {
                        tracing::error!(error = %panic, "reconcile panicked; retrying later");
                        (request, Some(retry))
                    })
                });
            }
        }
    }
    sweep.abort();
    tracing::info!(controller = %job.plan.name(), in_flight = in_flight.len(), "controller stopping; finishing reconciles in flight");
    while in_flight.next().await.is_some() {}
}

impl<R: Reconcile> Job<R> {
    /// Reconciles one request; returns it with the delay before the next reconcile, if any.
    async fn reconcile(self: Arc<Self>, request: Request<R>) -> (Request<R>, Option<Duration>) {
        let namespace = request.object.namespace.clone();
        let cache = self
            .primaries
            .get(&(request.context, namespace.clone()))
            .or_else(|| self.primaries.get(&(request.context, None)));
        // Gone from the cache: deleted (the finalizer keeps objects that still have children).
        let Some(object) = cache.and_then(|cache| cache.store().get(&request.object)) else {
            self.failures().remove(&request);
            return (request, None);
        };
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.plan.name(),
            context = %request.context,
            namespace = namespace.as_deref().unwrap_or(""),
            name = %request.object.name,
        );
        let failures = self.failures().get(&request).copied().unwrap_or(0);
        let cx = Cx::new(
            request.context,
            self.plan.clone(),
            self.runtime.clone(),
            failures,
        );
        let (next, failed) = self.reconcile_object(object, &cx).instrument(span).await;
        if failed {
            *self.failures().entry(request.clone()).or_insert(0) += 1;
        } else {
            self.failures().remove(&request);
        }
        (request, next)
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<Request<R>, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Returns the delay before the next reconcile, and whether the user's code failed.
    async fn reconcile_object(
        &self,
        object: Arc<Primary<R>>,
        cx: &Cx<R::Context>,
    ) -> (Option<Duration>, bool) {
        let context = cx.context();
        if let Some(finalizer) = &self.finalizer {
            let has_finalizer = object.finalizers().iter().any(|f| f == finalizer);
            if object.meta().deletion_timestamp.is_some() {
                return if has_finalizer {
                    Box::pin(self.finalize(object, cx)).await
                } else {
                    (None, false)
                };
            }
            if !has_finalizer
                && let Err(error) = Box::pin(self.set_finalizer(&object, context, true)).await
            {
                tracing::warn!(error = %chain(&error), "adding the finalizer failed");
                return (Some(self.error_requeue), false);
            }
        } else if object.meta().deletion_timestamp.is_some() {
            return (None, false);
        }

        let action = match self.reconciler.reconcile(object.clone(), cx).await {
            Ok(action) => action,
            Err(error) => {
                tracing::warn!(error = %chain(&error), "reconcile failed");
                let action = self.reconciler.error_policy(object, &error, cx);
                return (action.requeue_after(), true);
            }
        };
        let next = action.requeue_after().or(self.plan.requeue_delay());
        if self.plan.children().is_empty() {
            return (next, false);
        }
        let outcomes = Box::pin(self.sync_children(&object, context, cx.take_children())).await;
        Box::pin(self.write_status(&object, context, &outcomes)).await;
        // A context that failed is retried soon, whatever the reconcile asked for.
        let failed = outcomes.values().any(|o| o.state != ClusterState::Ready);
        if failed {
            (
                Some(next.map_or(self.error_requeue, |n| n.min(self.error_requeue))),
                false,
            )
        } else {
            (next, false)
        }
    }

    /// Applies the desired children and prunes the rest, every child context at once.
    async fn sync_children(
        &self,
        object: &Primary<R>,
        context: R::Context,
        desired: Vec<DesiredChild>,
    ) -> BTreeMap<String, Outcome> {
        let parent = self.parent_ref(object, context);
        let link = Parentage {
            parent: &parent,
            controller: self.plan.name(),
            parent_kind: &self.parent_kind,
        };
        let syncs = self.plan.child_contexts().into_iter().map(|child_context| {
            let name = child_context.name();
            let desired: Vec<DesiredChild> = desired
                .iter()
                .filter(|d| d.context == name)
                .cloned()
                .collect();
            let watches: Vec<ChildWatch> = self
                .children
                .iter()
                .filter(|w| w.context == name)
                .cloned()
                .collect();
            let link = &link;
            async move {
                let outcome = match self.runtime.pool.client(name) {
                    Ok(client) => {
                        timed(
                            name,
                            children::sync_context(name, client, desired, &watches, link),
                        )
                        .await
                    }
                    Err(error) => unusable(&error),
                };
                (name.to_owned(), outcome)
            }
        });
        join_all(syncs).await.into_iter().collect()
    }

    /// The parent is being deleted: runs the user's cleanup, removes the children in every context, then the
    /// finalizer. A context that cannot be reached keeps the finalizer (and says so in the status) until it
    /// returns, or until the abandon policy gives up on it.
    async fn finalize(
        &self,
        object: Arc<Primary<R>>,
        cx: &Cx<R::Context>,
    ) -> (Option<Duration>, bool) {
        let context = cx.context();
        if let Err(error) = self.reconciler.cleanup(object.clone(), cx).await {
            tracing::warn!(error = %chain(&error), "cleanup failed");
            return (
                self.reconciler
                    .error_policy(object, &error, cx)
                    .requeue_after(),
                true,
            );
        }
        let uid = object.uid().unwrap_or_default();
        let removals = self.plan.child_contexts().into_iter().map(|child_context| {
            let name = child_context.name();
            let targets: Vec<_> = self
                .plan
                .children()
                .iter()
                .filter(|c| c.context_list().contains(&child_context))
                .flat_map(|c| {
                    let namespaces: Vec<Option<String>> = if c.namespace_list().is_empty() {
                        vec![None]
                    } else {
                        c.namespace_list()
                            .iter()
                            .map(|ns| Some(ns.to_string()))
                            .collect()
                    };
                    namespaces.into_iter().map(|ns| (c.resource().clone(), ns))
                })
                .collect();
            let uid = uid.clone();
            async move {
                let outcome = match self.runtime.pool.client(name) {
                    Ok(client) => {
                        timed(
                            name,
                            children::remove_children(name, client, &targets, &uid),
                        )
                        .await
                    }
                    Err(error) => unusable(&error),
                };
                (name.to_owned(), outcome)
            }
        });
        let mut outcomes: BTreeMap<String, Outcome> =
            join_all(removals).await.into_iter().collect();
        let abandon = self
            .plan
            .abandon_after()
            .is_some_and(|after| deleted_for(&*object) >= after);
        let mut blocked = false;
        for (name, outcome) in &mut outcomes {
            if outcome.state == ClusterState::Ready {
                continue;
            }
            if abandon {
                let message = format!(
                    "context {name} was unreachable for longer than the abandon policy allows; its children were left behind ({})",
                    outcome.message.as_deref().unwrap_or("no detail")
                );
                tracing::warn!(%message, "abandoning children");
                self.publish_abandoned(&object, context, &message).await;
                *outcome = Outcome {
                    state: ClusterState::Abandoned,
                    children: 0,
                    message: Some(message),
                };
            } else {
                blocked = true;
                let why = outcome.message.take().unwrap_or_default();
                *outcome = Outcome {
                    state: ClusterState::Deleting,
                    children: outcome.children,
                    message: Some(format!("blocks deletion: {why}")),
                };
            }
        }
        if blocked {
            self.write_status(&object, context, &outcomes).await;
            return (Some(self.error_requeue), false);
        }
        // The abandonment is recorded in the status before the parent goes; removing the finalizer then
        // needs the resourceVersion that write produced.
        let mut object = object;
        if outcomes
            .values()
            .any(|o| o.state == ClusterState::Abandoned)
            && let Some(written) = self.write_status(&object, context, &outcomes).await
        {
            object = Arc::new(written);
        }
        match self.set_finalizer(&object, context, false).await {
            Ok(()) => (None, false),
            Err(error) => {
                tracing::warn!(error = %chain(&error), "removing the finalizer failed");
                (Some(self.error_requeue), false)
            }
        }
    }

    /// Adds or removes the finalizer; the resourceVersion in the patch makes it fail, not clobber, when the
    /// object changed meanwhile.
    async fn set_finalizer(
        &self,
        object: &Primary<R>,
        context: R::Context,
        present: bool,
    ) -> kube::Result<()> {
        let finalizer = self.finalizer.as_deref().unwrap_or_default();
        let mut finalizers: Vec<String> = object
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        if present {
            finalizers.push(finalizer.to_owned());
        }
        let patch = serde_json::json!({
            "metadata": { "finalizers": finalizers, "resourceVersion": object.resource_version() }
        });
        self.parent_api(object, context)?
            .patch(
                &object.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }

    /// Writes the per-context status when it changed (a write that changes nothing is skipped, so the
    /// status never feeds back into another reconcile); returns the object as written.
    async fn write_status(
        &self,
        object: &Primary<R>,
        context: R::Context,
        outcomes: &BTreeMap<String, Outcome>,
    ) -> Option<Primary<R>> {
        let previous: FleetStatus = serde_json::to_value(object)
            .ok()
            .and_then(|v| v.get("status").cloned())
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        let status =
            FleetStatus::from_outcomes(&previous, outcomes, object.meta().generation, &now());
        if status == previous {
            return None;
        }
        let patch = serde_json::json!({ "status": status });
        let params = PatchParams::default();
        let written = match self.parent_api(object, context) {
            Ok(api) => {
                api.patch_status(&object.name_any(), &params, &Patch::Merge(&patch))
                    .await
            }
            Err(error) => Err(error),
        };
        written
            .inspect_err(
                |e| tracing::warn!(error = %chain(e), "writing the per-cluster status failed"),
            )
            .ok()
    }

    async fn publish_abandoned(&self, object: &Primary<R>, context: R::Context, message: &str) {
        let Ok(client) = self.runtime.pool.client(context.name()) else {
            return;
        };
        let recorder = {
            let mut recorders = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
            let reporter = Reporter {
                controller: self.plan.name().to_owned(),
                instance: None,
            };
            recorders
                .entry(context)
                .or_insert_with(|| Recorder::new(client, reporter))
                .clone()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "ChildrenAbandoned".into(),
            note: Some(message.chars().take(1024).collect()),
            action: "Delete".into(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!(error = %chain(&error), "publishing the abandon event failed");
        }
    }

    fn parent_api(
        &self,
        object: &Primary<R>,
        context: R::Context,
    ) -> kube::Result<Api<Primary<R>>> {
        let client = self
            .runtime
            .pool
            .client(context.name())
            .map_err(|e| kube::Error::Service(e.into()))?;
        Ok(<<Primary<R> as Resource>::Scope as ApiScope>::api(
            client,
            object.namespace().as_deref(),
        ))
    }

    fn parent_ref(&self, object: &Primary<R>, context: R::Context) -> ParentRef {
        ParentRef {
            context: context.name().to_owned(),
            namespace: object.namespace(),
            name: object.name_any(),
            uid: object.uid().unwrap_or_default(),
        }
    }

    /// Once each child cache and the cache its parents would be in have listed, deletes the children whose
    /// parent no longer exists (deleted while the operator was not running). Parents in a context that never
    /// lists are never judged: nothing is removed on missing information.
    async fn sweep_orphans(self: Arc<Self>) {
        let job = &self;
        let sweeps = self.children.iter().map(|watch| async move {
            watch.cache.ready().await;
            for child in watch.cache.cached() {
                let Some(parent) = ParentRef::of(&child) else { continue };
                let Some(&context) = job.plan.context_list().iter().find(|c| c.name() == parent.context) else {
                    continue;
                };
                let Some(cache) = job
                    .primaries
                    .get(&(context, parent.namespace.clone()))
                    .or_else(|| job.primaries.get(&(context, None)))
                else {
                    continue;
                };
                if cache.store().wait_until_ready().await.is_err() {
                    continue;
                }
                let reference = ObjectRef::new(&parent.name);
                let reference = match &parent.namespace {
                    Some(namespace) => reference.within(namespace),
                    None => reference,
                };
                let alive = cache.store().get(&reference).is_some_and(|p| p.uid().as_deref() == Some(&parent.uid));
                if alive {
                    continue;
                }
                let Ok(client) = job.runtime.pool.client(&watch.context) else { continue };
                let name = child.name.clone().unwrap_or_default();
                tracing::info!(context = %watch.context, kind = %watch.resource.kind, %name, parent = %parent.name, "removing an orphaned child");
                if let Err(error) = children::delete(client, &watch.resource, &child).await {
                    tracing::warn!(error = %chain(&error), "removing an orphaned child failed");
                }
            }
        });
        join_all(sweeps).await;
    }
}

/// Bounds one context's sync, so that a hung server counts as unreachable instead of stalling the rest.
async fn timed(context: &str, work: impl Future<Output = Outcome>) -> Outcome {
    tokio::time::timeout(CONTEXT_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Outcome {
            state: ClusterState::Unreachable,
            children: 0,
            message: Some(format!(
                "context {context}: unreachable: no answer within {CONTEXT_TIMEOUT:?}"
            )),
        })
}

/// The outcome for a context the pool has no client for.
fn unusable(error: &crate::Error) -> Outcome {
    Outcome {
        state: ClusterState::Failed,
        children: 0,
        message: Some(error.to_string()),
    }
}

/// How long ago the object's deletion was requested.
fn deleted_for<K: Resource>(object: &K) -> Duration {
    let Some(deleted) = &object.meta().deletion_timestamp else {
        return Duration::ZERO;
    };
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(deleted.0);
    Duration::try_from(elapsed).unwrap_or(Duration::ZERO)
}
