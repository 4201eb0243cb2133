//! The requeue delay, the spans a reconcile runs in (recorded by a small tracing layer), a fenced write,
//! and the interim status, against stand-in API servers.

mod recording;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, ObjectMeta};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use tracing_subscriber::layer::SubscriberExt;

use self::recording::{Recording, SpanSeen};
use super::with_resync;
use crate::controller::test_controller::runtime_of;
use crate::core::Action;
use crate::core::{ClusterOutcome, ClusterState, FleetStatus};
use crate::engine::children::fan_out::not_answering_yet;
use crate::engine::engine::{ChildWatch, Engine, ReconcileKey};
use crate::engine::test_engine::{
    CLUSTER_A, CONTROL_CLUSTER, FixedCache, TestController, engine_with, parent,
};
use crate::testing::fake_api;
use crate::watch::SharedWatch;

#[test]
fn the_shorter_of_the_actions_requeue_and_the_plans_resync_wins() {
    let (minute, hour) = (Duration::from_secs(60), Duration::from_secs(3600));
    let (wait, requeue) = (Action::await_change(), Action::requeue);
    assert_eq!(
        with_resync(wait, Some(hour)),
        requeue(hour),
        "await_change: the resync holds"
    );
    assert_eq!(with_resync(requeue(minute), Some(hour)), requeue(minute));
    assert_eq!(with_resync(requeue(hour), Some(minute)), requeue(minute));
    assert_eq!(with_resync(requeue(hour), None), requeue(hour));
    assert_eq!(with_resync(wait, None), wait);
}

/// A child of the test parent in cluster-a that no reconcile wants: the reconcile prunes it.
fn stale_child() -> ObjectMeta {
    ObjectMeta {
        uid: Some("uid-stale".into()),
        ..crate::engine::test_engine::child_meta("stale")
    }
}

/// A server that accepts everything.
fn accept(method: &str, uri: &str, body: &str) -> (u16, serde_json::Value) {
    match method {
        "POST" => (201, serde_json::from_str(body).unwrap()),
        "GET" => (
            200,
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                "metadata": {}, "items": [],
            }),
        ),
        "DELETE" => (
            200,
            serde_json::json!({ "kind": "Status", "apiVersion": "v1", "status": "Success" }),
        ),
        _ if uri.contains("/status?") => (
            200,
            serde_json::json!({ "metadata": { "resourceVersion": "2" } }),
        ),
        _ => (200, serde_json::to_value(parent(&[])).unwrap()),
    }
}

/// Runs one reconcile of `object` (held by the primary cache) against a server that accepts everything;
/// returns the engine, so that what its end logs is not mistaken for the reconcile's.
async fn reconcile(object: ConfigMap) -> Arc<Engine<TestController>> {
    let (client, _) = fake_api::client(accept);
    reconcile_with(object, client.clone(), client).await
}

/// Runs one reconcile of `object`, with the parent in `control` and its stale child in `cluster_a`.
async fn reconcile_with(
    object: ConfigMap,
    control: kube::Client,
    cluster_a: kube::Client,
) -> Arc<Engine<TestController>> {
    let mut engine = engine_with(control, cluster_a);
    let (store, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
    engine.primaries.insert(
        (CONTROL_CLUSTER, Some("crds".into())),
        Arc::new(SharedWatch::fed(store, None)),
    );
    engine.children.push(ChildWatch {
        context: crate::core::Context::name(&CLUSTER_A).into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
        cache: Arc::new(FixedCache(vec![stale_child()])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let key: ReconcileKey<TestController> = ReconcileKey {
        context: CONTROL_CLUSTER,
        object: ObjectRef::from_obj(&object),
    };
    let engine = Arc::new(engine);
    let _ = engine.clone().reconcile(key, None).await;
    engine
}

fn descends(span: &SpanSeen, ancestor: &SpanSeen) -> bool {
    span.within.contains(&ancestor.seq)
}

#[tokio::test]
async fn a_reconcile_runs_in_a_span_with_its_id_and_its_child_work_in_spans_within_it() {
    let recording = Recording::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recording.clone()));

    let first = reconcile(parent(&["kubeplex.dev/test-controller"])).await;
    let mut deleted = parent(&["kubeplex.dev/test-controller"]);
    deleted.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let second = reconcile(deleted).await;
    let events = recording.events.lock().clone();
    drop((first, second));

    let spans = recording.spans.lock().clone();
    let named = |name: &str| -> Vec<SpanSeen> {
        spans.iter().filter(|s| s.name == name).cloned().collect()
    };
    let reconciles = named("reconcile");
    assert_eq!(reconciles.len(), 2, "{spans:#?}");
    let mut ids = Vec::new();
    for span in &reconciles {
        assert!(span.within.is_empty(), "a reconcile is a root span");
        let fields: Vec<&str> = span.fields.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            ["cluster", "controller", "name", "namespace", "reconcile_id"]
        );
        assert_eq!(span.fields["controller"], "test-controller");
        assert_eq!(span.fields["cluster"], "control");
        assert_eq!(
            (
                span.fields["namespace"].as_str(),
                span.fields["name"].as_str()
            ),
            ("crds", "parent")
        );
        let id = &span.fields["reconcile_id"];
        assert!(
            id.len() == 12 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        ids.push(id.clone());
    }
    assert_ne!(ids[0], ids[1], "every reconcile has an id of its own");
    let (sync, deletion) = (&reconciles[0], &reconciles[1]);

    // The sync: one apply span for cluster-a, the pruning of the stale child within it, the status write.
    let apply = named("apply");
    assert_eq!(apply.len(), 1, "{spans:#?}");
    assert!(descends(&apply[0], sync));
    assert_eq!(apply[0].fields["cluster"], "cluster-a");
    assert_eq!(apply[0].fields["children"], "0");
    let prune = named("prune");
    assert_eq!(prune.len(), 2, "{spans:#?}");
    assert!(descends(&prune[0], &apply[0]) && descends(&prune[0], sync));
    assert_eq!(
        (
            prune[0].fields["cluster"].as_str(),
            prune[0].fields["children"].as_str()
        ),
        ("cluster-a", "1")
    );
    // The deletion: cluster-a's children removed (none were left) in a prune span.
    assert!(descends(&prune[1], deletion), "{spans:#?}");
    assert_eq!(
        (
            prune[1].fields["cluster"].as_str(),
            prune[1].fields["children"].as_str()
        ),
        ("cluster-a", "0")
    );
    let status_writes = named("status_write");
    assert!(
        !status_writes.is_empty() && status_writes.iter().all(|s| descends(s, sync)),
        "{spans:#?}"
    );

    // Every log line of the reconciles was written within their spans: a fmt subscriber prints their fields.
    // (The client's own buffer worker is a task of its own: its lines are not the runtime's.)
    let pruning = events
        .iter()
        .find(|e| e.message == "deleting a child no longer desired")
        .expect("the prune is logged");
    assert_eq!(pruning.within, [prune[0].seq, apply[0].seq, sync.seq]);
    for event in events.iter().filter(|e| e.target.starts_with("kubeplex")) {
        assert!(
            event.within.contains(&sync.seq) || event.within.contains(&deletion.seq),
            "a log line outside the reconcile spans: {event:?}"
        );
    }
}

/// `client` behind `fence`, as the pool and the shards build their clients.
fn behind(fence: &crate::client::Fence, client: kube::Client) -> kube::Client {
    use tower::Layer;
    let send = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        async move { client.send(request).await }
    });
    kube::Client::new(fence.layer(send), "default")
}

/// A prune refused by this replica's fence (it lost the Lease) is neither the cluster's failure nor a
/// reason to write: the reconcile writes no status (it used to say `Unreachable`) and no Event.
#[tokio::test]
async fn a_fenced_write_leaves_the_status_and_the_events_alone() {
    let (control, seen) = fake_api::client(accept);
    let (cluster_a, reached) = fake_api::client(accept);
    let cluster_a = behind(&crate::client::Fence::closed(), cluster_a);
    // The parent carries its finalizer already, so the only writes due are the child's and the status'.
    let plan = <TestController as crate::controller::Controller>::plan();
    let finalizer = plan
        .managed_finalizer()
        .expect("a controller with children has a finalizer");
    reconcile_with(parent(&[&finalizer]), control, cluster_a).await;
    assert!(
        reached.all().is_empty(),
        "the fence let a write through: {:?}",
        reached.lines()
    );
    let writes: Vec<String> = seen
        .lines()
        .into_iter()
        .filter(|line| !line.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "a fenced replica wrote: {writes:#?}");

    // The same reconcile with the fence open prunes the child and writes the status: the test sees writes.
    let (control, seen) = fake_api::client(accept);
    let (cluster_a, reached) = fake_api::client(accept);
    let open = crate::client::Fence::closed();
    open.open_for(tokio::time::Instant::now(), Duration::from_secs(60));
    reconcile_with(parent(&[&finalizer]), control, behind(&open, cluster_a)).await;
    assert!(
        reached.lines().iter().any(|l| l.starts_with("DELETE ")),
        "{:?}",
        reached.lines()
    );
    assert!(
        seen.lines().iter().any(|l| l.contains("/status?")),
        "{:?}",
        seen.lines()
    );
}

/// A client whose server never answers.
fn hanging() -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| {
        std::future::pending::<
            Result<
                http::Response<http_body_util::Full<hyper::body::Bytes>>,
                std::convert::Infallible,
            >,
        >()
    });
    kube::Client::new(service, "default")
}

/// The status writes of one reconcile of the test parent whose children live in cluster-a (which answers)
/// and cluster-b (which never answers the prune of a stale child), when the controller last wrote `written`
/// (the cache does not show it).
async fn status_writes(written: Option<FleetStatus>) -> Vec<serde_json::Value> {
    let (client, seen) = fake_api::client(accept);
    let mut engine = engine_with(client.clone(), client.clone());
    let plan = <TestController as crate::controller::Controller>::plan();
    let finalizer = plan.managed_finalizer().unwrap().into_owned();
    let child = crate::plan::Child::of::<ConfigMap>()
        .with_contexts([CLUSTER_A, CLUSTER_B])
        .with_namespaces(["ns"]);
    engine.plan = Arc::new(plan.owns(child));
    engine.runtime = runtime_of([
        ("control", client.clone()),
        ("cluster-a", client),
        ("cluster-b", hanging()),
    ]);
    engine.children.push(ChildWatch {
        context: "cluster-b".into(),
        resource: ApiResource::erase::<ConfigMap>(&()),
        namespace: None,
        cache: Arc::new(FixedCache(vec![stale_child()])),
        answered: Default::default(),
        applied: Default::default(),
    });
    let object = parent(&[&finalizer]);
    let (store, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
    engine.primaries.insert(
        (CONTROL_CLUSTER, Some("crds".into())),
        Arc::new(SharedWatch::fed(store, None)),
    );
    if let Some(written) = written {
        engine.written_status.record(&object, Some("2"), written);
    }
    let key = ReconcileKey::<TestController> {
        context: CONTROL_CLUSTER,
        object: ObjectRef::from_obj(&object),
    };
    let _ = Arc::new(engine).reconcile(key, None).await;
    (seen.all().iter())
        .filter(|s| s.uri.contains("/status?"))
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect()
}

const CLUSTER_B: crate::core::ContextName = crate::core::ContextName::new("cluster-b");

/// The interim status is written over what the controller remembers of its own writes, as the final one
/// is: an interim status that is the controller's last write is not written again while the cache lags.
#[tokio::test(start_paused = true)]
async fn an_interim_status_the_controller_wrote_last_is_not_written_again() {
    // Without a write of its own to remember, the reconcile writes the interim status, then the final one.
    let writes = status_writes(None).await;
    assert_eq!(writes.len(), 2, "{writes:#?}");
    let (interim, last) = (&writes[0]["status"], &writes[1]["status"]);
    assert_eq!(interim["clusters"]["cluster-a"]["state"], "NotTargeted");
    assert!(
        interim["clusters"]["cluster-b"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer yet")
    );
    assert!(
        last["clusters"]["cluster-b"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer within")
    );

    // The interim status is what the controller wrote last: only the final one is written.
    let so_far = BTreeMap::from([
        (
            "cluster-a".to_owned(),
            ClusterOutcome {
                fenced: None,
                state: ClusterState::NotTargeted,
                children: 0,
                message: None,
            },
        ),
        ("cluster-b".to_owned(), not_answering_yet()),
    ]);
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let interim = FleetStatus::from_outcomes(
        &FleetStatus::default(),
        &so_far,
        &BTreeMap::new(),
        None,
        &now,
    );
    let writes = status_writes(Some(interim)).await;
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert!(
        writes[0]["status"]["clusters"]["cluster-b"]["message"]
            .as_str()
            .unwrap()
            .contains("no answer within")
    );
}

/// A fenced write while this replica still leads by its Lease loop's word (the fence lapsed for a moment, a
/// renewal came late) queues the parent again shortly, since nothing else would; once another leads, the
/// parent is left to it.
#[tokio::test]
async fn a_fenced_write_is_tried_again_while_this_replica_still_holds_the_fence() {
    use std::collections::BTreeMap;

    use crate::core::{Action, ClusterOutcome, ClusterState};

    let (client, _) = fake_api::client(accept);
    let mut engine = engine_with(client.clone(), client);
    let outcome = |fenced| ClusterOutcome {
        fenced,
        state: ClusterState::Unreachable,
        children: 0,
        message: None,
    };
    let fenced = BTreeMap::from([("cluster-a".to_owned(), outcome(Some("not the leader")))]);
    let written = BTreeMap::from([("cluster-a".to_owned(), outcome(None))]);
    assert_eq!(engine.stands_down(None, &written), None);
    assert_eq!(
        engine.stands_down(None, &fenced),
        Some(Action::requeue(crate::ha::FENCE_LAPSE_RETRY))
    );

    let mut runtime = Arc::try_unwrap(engine.runtime)
        .ok()
        .expect("the engine's runtime alone");
    let another = crate::client::Role {
        leader: false,
        holder: Some("replica-b".into()),
    };
    runtime.role = tokio::sync::watch::channel(another).1;
    engine.runtime = Arc::new(runtime);
    assert_eq!(
        engine.stands_down(None, &fenced),
        Some(Action::await_change())
    );
}
