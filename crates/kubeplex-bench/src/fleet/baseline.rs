//! The fleet section's baseline: the operator a kube-rs user writes for the job today. A kube-runtime
//! `Controller` on the parents with the stock `finalizer` helper; one reflector per child cluster (this
//! operator's Deployments, selected by a label), fed back through `watches_stream`; every child applied
//! with server-side apply, stale ones pruned by label; the same per-cluster status as kubeplex, written only
//! when it changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, try_join_all};
use futures::{FutureExt, StreamExt};
use indexmap::IndexSet;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, Predicate, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use kubeplex::{ClusterState, FleetStatus, status::ClusterStatus, status::Condition};

use super::app::{APP_LABEL, FINALIZER, FleetApp, PARENT_NAMESPACE, deployment_for};

/// Field manager, and the value of the label that selects this operator's children.
const MANAGER: &str = "fleet-baseline";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// What the example operator asks for after a success, and its error requeue.
const RESYNC: Duration = Duration::from_secs(3600);
const RETRY: Duration = Duration::from_secs(5);

/// One child cluster: its client and the cache of this operator's Deployments there.
struct ChildCluster {
    name: String,
    client: Client,
    children: Store<Deployment>,
}

struct Operator {
    control: Client,
    clusters: Vec<ChildCluster>,
}

pub(super) struct Running {
    /// The parents' store, then each child cluster's.
    parents: Store<FleetApp>,
    children: Vec<Store<Deployment>>,
    _controller: tokio::task::JoinHandle<()>,
}

/// Starts the operator: `control` is the parents' client, `clusters` (context name, client) the children's.
pub(super) fn start(
    control: Client,
    clusters: Vec<(String, Client)>,
    concurrency: Option<u16>,
) -> Running {
    let (parents, writer) = reflector::store();
    // Status writes and no-op updates do not reach the reconciler; generation covers spec edits and the
    // deletion mark, finalizers the helper's own add (which leaves generation as it was).
    let parent_events = watcher(
        Api::<FleetApp>::namespaced(control.clone(), PARENT_NAMESPACE),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(
        predicates::generation::<FleetApp>.combine(predicates::finalizers),
        Default::default(),
    );
    let mut config = controller::Config::default();
    if let Some(limit) = concurrency {
        config = config.concurrency(limit);
    }
    let mut controller = Controller::for_stream(parent_events, parents.clone()).with_config(config);
    let mut operator = Operator {
        control,
        clusters: Vec::new(),
    };
    for (name, client) in clusters {
        let (children, writer) = reflector::store();
        let events = watcher(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default().labels(&format!("{MANAGED_BY}={MANAGER}")),
        )
        .default_backoff()
        .reflect(writer)
        // Deletions too: a child deleted by hand is put back.
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
        controller = controller.watches_stream(events, |child: Deployment| {
            let parent = child.labels().get(APP_LABEL)?;
            Some(ObjectRef::new(parent).within(PARENT_NAMESPACE))
        });
        operator.clusters.push(ChildCluster {
            name,
            client,
            children,
        });
    }
    let children = operator
        .clusters
        .iter()
        .map(|c| c.children.clone())
        .collect();
    let task = controller
        .run(reconcile, error_policy, Arc::new(operator))
        .for_each(|result| {
            if let Err(error) = result {
                eprintln!("baseline fleet controller: {error}");
            }
            std::future::ready(())
        });
    Running {
        parents,
        children,
        _controller: tokio::spawn(task),
    }
}

impl Running {
    /// Every store has listed. Re-polled: `Store::wait_until_ready` keeps one waker and the Controller's
    /// own applier awaits the parents' store (see `child/process.rs`).
    pub async fn synced(&self) -> Result<(), String> {
        let parents = std::iter::once(self.parents.wait_until_ready().boxed());
        let children = self.children.iter().map(|s| s.wait_until_ready().boxed());
        for ready in parents.chain(children) {
            let mut ready = ready;
            loop {
                match tokio::time::timeout(Duration::from_millis(1), &mut ready).await {
                    Ok(Ok(())) => break,
                    Ok(Err(e)) => return Err(format!("a store was dropped: {e}")),
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }
}

type Error = finalizer::Error<kube::Error>;

async fn reconcile(app: Arc<FleetApp>, operator: Arc<Operator>) -> Result<Action, Error> {
    let api: Api<FleetApp> = Api::namespaced(operator.control.clone(), PARENT_NAMESPACE);
    finalizer(&api, FINALIZER, app, |event| async {
        match event {
            Event::Apply(app) => operator.apply(&app, &api).await,
            Event::Cleanup(app) => operator.cleanup(&app).await,
        }
    })
    .await
}

fn error_policy(_: Arc<FleetApp>, error: &Error, _: Arc<Operator>) -> Action {
    eprintln!("baseline fleet reconcile: {error}");
    Action::requeue(RETRY)
}

impl Operator {
    async fn apply(&self, app: &FleetApp, api: &Api<FleetApp>) -> Result<Action, kube::Error> {
        let outcomes = join_all(self.clusters.iter().map(|cluster| cluster.sync(app))).await;
        let previous = app
            .status
            .as_ref()
            .map(|s| s.fleet.clone())
            .unwrap_or_default();
        let status = status_for(&previous, &self.clusters, outcomes, app.meta().generation);
        let all_ready = status.conditions.iter().all(|c| c.status == "True");
        if status != previous {
            let patch = serde_json::json!({
                "apiVersion": FleetApp::api_version(&()),
                "kind": FleetApp::kind(&()),
                "status": status,
            });
            api.patch_status(
                &app.name_any(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await?;
        }
        Ok(Action::requeue(if all_ready { RESYNC } else { RETRY }))
    }

    async fn cleanup(&self, app: &FleetApp) -> Result<Action, kube::Error> {
        try_join_all(self.clusters.iter().map(|cluster| cluster.remove(app))).await?;
        Ok(Action::await_change())
    }
}

impl ChildCluster {
    /// Applies the parent's Deployments here and prunes the ones it no longer wants; the number applied.
    async fn sync(&self, app: &FleetApp) -> Result<u32, kube::Error> {
        let params = PatchParams::apply(MANAGER).force();
        try_join_all(app.spec.namespaces.iter().map(|namespace| {
            let mut child = deployment_for(app, namespace);
            child
                .labels_mut()
                .insert(MANAGED_BY.to_owned(), MANAGER.to_owned());
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
            let params = &params;
            async move {
                api.patch(&app.name_any(), params, &Patch::Apply(&child))
                    .await
            }
        }))
        .await?;
        let stale = self.children_of(app).into_iter().filter(|child| {
            !app.spec
                .namespaces
                .iter()
                .any(|ns| child.namespace().as_ref() == Some(ns))
        });
        try_join_all(stale.map(|child| self.delete(child))).await?;
        Ok(app.spec.namespaces.len() as u32)
    }

    /// Deletes every Deployment of the parent here: the ones its spec names, and any other the cache holds.
    async fn remove(&self, app: &FleetApp) -> Result<(), kube::Error> {
        let name = app.name_any();
        let mut targets: IndexSet<String> = app.spec.namespaces.iter().cloned().collect();
        targets.extend(self.children_of(app).iter().filter_map(|c| c.namespace()));
        try_join_all(targets.iter().map(|namespace| {
            let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
            let name = &name;
            async move { gone_is_fine(api.delete(name, &DeleteParams::background()).await) }
        }))
        .await?;
        Ok(())
    }

    fn children_of(&self, app: &FleetApp) -> Vec<Arc<Deployment>> {
        let name = app.name_any();
        self.children
            .state()
            .into_iter()
            .filter(|child| child.labels().get(APP_LABEL) == Some(&name))
            .collect()
    }

    async fn delete(&self, child: Arc<Deployment>) -> Result<(), kube::Error> {
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &child.namespace().unwrap_or_default());
        gone_is_fine(
            api.delete(&child.name_any(), &DeleteParams::background())
                .await,
        )
    }
}

fn gone_is_fine<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

/// The status kubeplex would write for these outcomes: per cluster Ready (with its children) or Failed, and
/// the `Ready` condition; transition times move only when a state changes.
fn status_for(
    previous: &FleetStatus,
    clusters: &[ChildCluster],
    outcomes: Vec<Result<u32, kube::Error>>,
    generation: Option<i64>,
) -> FleetStatus {
    let now = now();
    let since = |name: &str, state: ClusterState| {
        previous
            .clusters
            .get(name)
            .filter(|c| c.state == state)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone())
    };
    let clusters: BTreeMap<String, ClusterStatus> = clusters
        .iter()
        .zip(outcomes)
        .map(|(cluster, outcome)| {
            let (state, children, message) = match outcome {
                Ok(children) => (ClusterState::Applied, children, None),
                Err(error) => (ClusterState::Failed, 0, Some(error.to_string())),
            };
            let status = ClusterStatus::new(state, children, since(&cluster.name, state));
            let status = match message {
                Some(message) => status.message(message),
                None => status,
            };
            (cluster.name.clone(), status)
        })
        .collect();
    let failed: Vec<String> = clusters
        .iter()
        .filter_map(|(name, c)| Some(format!("{name}: Failed ({})", c.message.as_ref()?)))
        .collect();
    let (status_value, reason, message) = if failed.is_empty() {
        (
            "True",
            "AllClustersApplied",
            "children are in place in every cluster".to_owned(),
        )
    } else {
        ("False", "ClustersNotApplied", failed.join("; "))
    };
    let ready_since = previous
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied" && c.status == status_value)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    let mut status = FleetStatus::default();
    status.clusters = clusters;
    // kubeplex's `Applied` (its `Ready` also asks the children to be healthy, which the bench's clusters,
    // without a kubelet, never make them): the same meaning on both sides.
    status.conditions = vec![Condition {
        type_: "Applied".into(),
        status: status_value.into(),
        reason: reason.into(),
        message,
        last_transition_time: ready_since,
        observed_generation: generation,
    }];
    status
}

/// Now, to the second, as a `Time` is written.
fn now() -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second())
            .unwrap(),
    )
}
