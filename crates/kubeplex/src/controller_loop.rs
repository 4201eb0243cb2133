//! One controller, wired: its watches feed the executor with requests keyed by (context, object); a child's
//! change becomes a request for its parent; the engine reconciles each; the orphan sweep runs beside.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::context::Context;
use crate::controller::Reconcile;
use crate::engine::{ChildWatch, Engine, Primary, Request};
use crate::events::EventPublisher;
use crate::executor::{self, ExecutorConfig};
use crate::plan::Plan;
use crate::resource::kind_label;
use crate::runtime::Runtime;
use crate::trigger::ChangeFilter;
use crate::watches::WatchKey;

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
            index_label: None,
        };
        let watch = runtime.watches.watch::<Primary<R>>(key, client);
        let changed = ChangeFilter::default();
        let requests = watch.subscribe(move |change| {
            changed.passes(change).then(|| Request::<R> {
                context,
                object: ObjectRef::from_obj(change.object()),
            })
        });
        inputs.push(requests.boxed());
        primaries.insert((context, namespace.map(str::to_owned)), watch);
    }
    let shared_plan = Arc::new(plan);
    let mut children = Vec::new();
    for child in shared_plan.children() {
        for (context, namespace) in child.watches() {
            let Ok(client) = runtime.pool.client(context.name()) else {
                continue;
            };
            let cache = (child.open)(&runtime.watches, context.name(), namespace, &name, client);
            // A child's change is a change of its parent: map it back through the stamped reference.
            let plan = shared_plan.clone();
            let parents = cache.parents().filter_map(move |parent| {
                std::future::ready(Engine::<R>::request_for(&plan, &parent))
            });
            inputs.push(parents.boxed());
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
    let engine = Arc::new(Engine {
        reconciler,
        finalizer: shared_plan.managed_finalizer().map(|f| f.into_owned()),
        parent_kind: kind_label::<Primary<R>>(),
        events: EventPublisher::new(&name),
        plan: shared_plan,
        runtime,
        primaries,
        children,
        failures: std::sync::Mutex::default(),
        no_status: Default::default(),
        written_status: Default::default(),
        finalized: Default::default(),
    });
    async move {
        let sweep = tokio::spawn(engine.clone().sweep_orphans());
        let work = move |request: Request<R>| {
            let engine = engine.clone();
            async move {
                let context = request.context;
                let run = std::panic::AssertUnwindSafe(engine.clone().reconcile(request));
                match futures::FutureExt::catch_unwind(run).await {
                    Ok(next) => next,
                    Err(panic) => {
                        // Counted here, where the context is known; the executor retries the key.
                        let (metrics, controller) = (&engine.runtime.metrics, engine.plan.name());
                        metrics.panicked(controller, context.name());
                        metrics.retried(controller);
                        std::panic::resume_unwind(panic)
                    }
                }
            }
        };
        let span = tracing::info_span!("controller", controller = %name);
        tracing::Instrument::instrument(
            executor::run(stream::select_all(inputs), config, stop, work),
            span,
        )
        .await;
        sweep.abort();
    }
}
