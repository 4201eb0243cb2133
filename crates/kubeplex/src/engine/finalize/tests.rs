//! The finalizer patches and the deletion path's events, against a stand-in API server.

use super::*;
use crate::controller::Controller;
use crate::engine::test_engine::{CONTROL_CLUSTER, TestController, engine, linked, parent};
use crate::testing::fake_api::{self, status};

const OURS: &str = "kubeplex.dev/test-controller";

fn operations(patch: Option<json_patch::Patch>) -> serde_json::Value {
    serde_json::to_value(patch).unwrap()
}

#[test]
fn the_patches_test_the_list_they_change() {
    assert_eq!(
        operations(finalizer_patch(&[], OURS, true)),
        serde_json::json!([
            { "op": "test", "path": "/metadata/finalizers", "value": null },
            { "op": "add", "path": "/metadata/finalizers", "value": [OURS] },
        ])
    );
    let theirs = ["example.com/theirs".to_owned()];
    assert_eq!(
        operations(finalizer_patch(&theirs, OURS, true)),
        serde_json::json!([
            { "op": "test", "path": "/metadata/finalizers", "value": ["example.com/theirs"] },
            { "op": "add", "path": "/metadata/finalizers/-", "value": OURS },
        ])
    );
    let both = ["example.com/theirs".to_owned(), OURS.to_owned()];
    assert_eq!(
        operations(finalizer_patch(&both, OURS, false)),
        serde_json::json!([
            { "op": "test", "path": "/metadata/finalizers/1", "value": OURS },
            { "op": "remove", "path": "/metadata/finalizers/1" },
        ])
    );
    assert!(finalizer_patch(&both, OURS, true).is_none());
    assert!(finalizer_patch(&theirs, OURS, false).is_none());
}

#[tokio::test]
async fn removing_the_finalizer_of_a_parent_that_is_gone_is_success() {
    let (client, requests) =
        fake_api::client(|_, _, _| status(404, "NotFound", "configmaps \"parent\" not found"));
    let engine = engine(client);
    engine
        .set_finalizer((&parent(&[OURS]), &CONTROL_CLUSTER, None), false)
        .await
        .unwrap();
    assert_eq!(requests.lines().len(), 1);
}

#[tokio::test]
async fn a_stale_cached_parent_is_retried_at_once_against_a_fresh_copy() {
    // The cache says no finalizers; the server has one of someone else's, so the first test fails.
    let (client, requests) = fake_api::client(|method, _, body| match method {
        "PATCH" if body.contains("\"value\":null") => {
            status(422, "Invalid", "the test operation failed")
        }
        "PATCH" => (
            200,
            serde_json::to_value(parent(&["example.com/theirs", OURS])).unwrap(),
        ),
        _ => (
            200,
            serde_json::to_value(parent(&["example.com/theirs"])).unwrap(),
        ),
    });
    let engine = engine(client);
    engine
        .set_finalizer((&parent(&[]), &CONTROL_CLUSTER, None), true)
        .await
        .unwrap();
    let seen = requests.all();
    let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(methods, ["PATCH", "GET", "PATCH"]);
    assert!(
        seen[2].body.contains("example.com/theirs")
            && seen[2].body.contains("/metadata/finalizers/-")
    );
}

#[tokio::test]
async fn other_failures_are_reported_after_one_try() {
    let (client, requests) = fake_api::client(|_, _, _| status(403, "Forbidden", "no"));
    let engine = engine(client);
    let error = engine
        .set_finalizer((&parent(&[]), &CONTROL_CLUSTER, None), true)
        .await
        .unwrap_err();
    let forbidden =
        matches!(&error, Error::Kube { source: kube::Error::Api(s), .. } if s.code == 403);
    assert!(forbidden, "{error}");
    assert!(
        error.to_string().starts_with("cluster control: "),
        "{error}"
    );
    assert_eq!(requests.lines().len(), 1);
}

/// The events the fake server was sent, as (method, reason).
fn events_sent(requests: &fake_api::Requests) -> Vec<(String, String)> {
    requests
        .all()
        .into_iter()
        .filter(|s| {
            s.uri
                .starts_with("/apis/events.k8s.io/v1/namespaces/crds/events")
        })
        .map(|s| {
            let body: serde_json::Value = serde_json::from_str(&s.body).unwrap_or_default();
            let reason = body["reason"].as_str().unwrap_or_default().to_owned();
            (s.method, reason)
        })
        .collect()
}

#[tokio::test]
async fn a_blocked_deletion_is_told_once_however_often_it_is_retried_and_its_end_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    // cluster-a's children cannot be listed while `down`; everything else is accepted.
    let down = Arc::new(AtomicBool::new(true));
    let server = down.clone();
    let (client, requests) = fake_api::client(move |method, uri, body| match method {
        "GET" if server.load(Ordering::SeqCst) => status(503, "ServiceUnavailable", "down"),
        "GET" => (
            200,
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                "metadata": {}, "items": [],
            }),
        ),
        "POST" => (201, serde_json::from_str(body).unwrap()),
        _ if uri.contains("/status?") => (
            200,
            serde_json::json!({ "metadata": { "resourceVersion": "2" } }),
        ),
        _ => (200, serde_json::to_value(parent(&[])).unwrap()),
    });
    let engine = engine(client);
    let mut deleted = parent(&[OURS]);
    deleted.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let deleted = Arc::new(deleted);
    let cx = Cx::new(
        CONTROL_CLUSTER,
        engine.plan.clone(),
        engine.runtime.clone(),
        0,
    );

    // The cache keeps showing the parent as it was before the first status write (resourceVersion 1).
    for _ in 0..3 {
        let verdict = engine.finalize(deleted.clone(), &cx).await;
        assert!(
            matches!(verdict, Verdict::Done(a) if a.requeue_after().is_some()),
            "{verdict:?}"
        );
    }
    assert_eq!(
        events_sent(&requests),
        [("POST".to_owned(), "DeletionBlocked".to_owned())],
        "one event for three attempts"
    );

    down.store(false, Ordering::SeqCst);
    let verdict = engine.finalize(deleted.clone(), &cx).await;
    assert_eq!(verdict, Verdict::Done(Action::await_change()));
    assert_eq!(
        events_sent(&requests),
        [
            ("POST".to_owned(), "DeletionBlocked".to_owned()),
            ("POST".to_owned(), "DeletionUnblocked".to_owned()),
        ]
    );
}

/// A client whose server refuses every connection.
fn refusing() -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        Err::<http::Response<http_body_util::Full<hyper::body::Bytes>>, _>(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        ))
    });
    kube::Client::new(service, "default")
}

/// Each layer that words a blocked deletion (the failed request, the deletion path, the Event, the status'
/// condition) used to name the cluster again; each message now names it once, and the cluster's own entry
/// in the status leaves it to its key.
#[tokio::test]
async fn a_blocked_deletion_names_the_cluster_once_in_each_message() {
    let (control, requests) = fake_api::client(|method, uri, body| match method {
        "POST" => (201, serde_json::from_str(body).unwrap()),
        _ if uri.contains("/status?") => (
            200,
            serde_json::json!({ "metadata": { "resourceVersion": "2" } }),
        ),
        _ => (200, serde_json::to_value(parent(&[])).unwrap()),
    });
    let engine = crate::engine::test_engine::engine_with(control, refusing());
    let mut deleted = parent(&[OURS]);
    deleted.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let cx = Cx::new(
        CONTROL_CLUSTER,
        engine.plan.clone(),
        engine.runtime.clone(),
        0,
    );
    engine.finalize(Arc::new(deleted), &cx).await;

    let sent = |path: &str| -> serde_json::Value {
        let request = (requests.all().into_iter())
            .find(|s| s.uri.contains(path))
            .unwrap_or_else(|| panic!("nothing sent to {path}: {:?}", requests.lines()));
        serde_json::from_str(&request.body).unwrap()
    };
    let named = |text: &str| text.matches("cluster-a").count();
    let event = sent("/events");
    let note = event["note"].as_str().unwrap();
    assert_eq!(
        note,
        "deletion waits for children that cannot be removed yet in cluster-a (listing configmaps: unreachable: connection refused)"
    );
    let status = &sent("/status?")["status"];
    let entry = status["clusters"]["cluster-a"]["message"].as_str().unwrap();
    assert_eq!(entry, "listing configmaps: unreachable: connection refused");
    let condition = status["conditions"][0]["message"].as_str().unwrap();
    assert_eq!(
        (named(note), named(entry), named(condition)),
        (1, 0, 1),
        "{condition}"
    );
}

/// A parent deleted `ago`, with the controller's finalizer.
fn deleted_parent(ago: Duration) -> Arc<k8s_openapi::api::core::v1::ConfigMap> {
    let mut deleted = parent(&[OURS]);
    let when = k8s_openapi::jiff::Timestamp::now() - ago;
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(when));
    Arc::new(deleted)
}

/// A server where the parent's child `ns/held` in cluster-a is deleted but kept by its finalizer while
/// `held`; the requests it was sent.
fn holding(held: Arc<std::sync::atomic::AtomicBool>) -> (kube::Client, fake_api::Requests) {
    use std::sync::atomic::Ordering;
    fake_api::client(move |method, uri, body| match method {
        "GET" if uri.starts_with("/api/v1/namespaces/ns/configmaps?") => {
            let items = if held.load(Ordering::SeqCst) {
                vec![serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": linked(serde_json::json!({
                        "name": "held", "namespace": "ns", "uid": "uid-held",
                        "deletionTimestamp": "2026-01-01T00:00:00Z",
                        "finalizers": ["example.com/hold"],
                    })),
                })]
            } else {
                Vec::new()
            };
            (
                200,
                serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                    "metadata": {}, "items": items,
                }),
            )
        }
        "POST" => (201, serde_json::from_str(body).unwrap()),
        _ if uri.contains("/status?") => (
            200,
            serde_json::json!({ "metadata": { "resourceVersion": "2" } }),
        ),
        _ => (200, serde_json::to_value(parent(&[])).unwrap()),
    })
}

/// Whether the parent's finalizer was removed (a JSON patch of the parent itself, not its status).
fn released(requests: &fake_api::Requests) -> bool {
    requests.all().iter().any(|s| {
        s.method == "PATCH"
            && s.uri
                .starts_with("/api/v1/namespaces/crds/configmaps/parent?")
            && s.body.contains("\"remove\"")
    })
}

/// The last status the fake server was sent.
fn last_status(requests: &fake_api::Requests) -> serde_json::Value {
    let sent = (requests.all().into_iter().rev())
        .find(|s| s.uri.contains("/status?"))
        .expect("a status written");
    serde_json::from_str(&sent.body).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_child_deleted_but_still_there_holds_the_parent_until_it_is_gone() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let held = Arc::new(AtomicBool::new(true));
    let (client, requests) = holding(held.clone());
    let mut engine = engine(client);
    // Long past the unreachable bound: it is not what decides about a child still terminating.
    let plan = TestController::plan().with_abandon_unreachable_after(Duration::from_secs(60));
    engine.plan = Arc::new(plan);
    let deleted = deleted_parent(Duration::from_secs(3600));
    let cx = Cx::new(
        CONTROL_CLUSTER,
        engine.plan.clone(),
        engine.runtime.clone(),
        0,
    );
    let verdict = engine.finalize(deleted.clone(), &cx).await;
    assert!(matches!(verdict, Verdict::Done(a) if a.requeue_after().is_some()));
    tokio::time::advance(Duration::from_secs(3600)).await;
    let verdict = engine.finalize(deleted.clone(), &cx).await;
    assert!(
        matches!(verdict, Verdict::Done(a) if a.requeue_after().is_some()),
        "{verdict:?}"
    );
    assert!(
        !released(&requests),
        "released while a child is still there"
    );
    let status = last_status(&requests)["status"].clone();
    let cluster = &status["clusters"]["cluster-a"];
    assert_eq!(cluster["state"], "Deleting");
    assert_eq!(
        cluster["message"],
        "waiting for children to go: ConfigMap ns/held (Terminating; finalizers: example.com/hold)"
    );
    assert_eq!(status["conditions"][0]["reason"], "DeletionBlocked");

    held.store(false, Ordering::SeqCst);
    let verdict = engine.finalize(deleted, &cx).await;
    assert_eq!(verdict, Verdict::Done(Action::await_change()));
    assert!(released(&requests), "{:?}", requests.lines());
}

#[tokio::test(start_paused = true)]
async fn past_the_terminating_bound_the_parent_is_released_with_an_event_naming_what_stays() {
    let held = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (client, requests) = holding(held);
    let mut engine = engine(client);
    let plan = TestController::plan().with_abandon_terminating_after(Duration::from_secs(60));
    engine.plan = Arc::new(plan);
    let cx = Cx::new(
        CONTROL_CLUSTER,
        engine.plan.clone(),
        engine.runtime.clone(),
        0,
    );
    // Requested long ago by the server's clock, but first seen now: it waits, whatever the clocks say.
    let deleted = deleted_parent(Duration::from_secs(3600));
    let verdict = engine.finalize(deleted.clone(), &cx).await;
    assert!(matches!(verdict, Verdict::Done(a) if a.requeue_after().is_some()));
    tokio::time::advance(Duration::from_secs(59)).await;
    let verdict = engine.finalize(deleted.clone(), &cx).await;
    assert!(matches!(verdict, Verdict::Done(a) if a.requeue_after().is_some()));
    assert!(!released(&requests));
    tokio::time::advance(Duration::from_secs(1)).await;
    let verdict = engine.finalize(deleted, &cx).await;
    assert_eq!(verdict, Verdict::Done(Action::await_change()));
    assert!(released(&requests), "{:?}", requests.lines());
    let abandoned = (requests.all().into_iter())
        .filter(|s| s.uri.contains("/events"))
        .map(|s| serde_json::from_str::<serde_json::Value>(&s.body).unwrap())
        .find(|event| event["reason"] == "ChildrenAbandoned")
        .expect("a ChildrenAbandoned event");
    assert_eq!(abandoned["type"], "Warning");
    let note = abandoned["note"].as_str().unwrap();
    assert!(
        note.starts_with("cluster-a: children still there longer than the abandon policy allows")
            && note.contains("ConfigMap ns/held (Terminating; finalizers: example.com/hold)"),
        "{note}"
    );
    let status = last_status(&requests)["status"].clone();
    assert_eq!(status["clusters"]["cluster-a"]["state"], "Abandoned");
}

#[tokio::test]
async fn a_child_its_policy_orphans_is_unlinked_told_and_does_not_hold_the_parent() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let unlinked = Arc::new(AtomicBool::new(false));
    let server = unlinked.clone();
    let (client, requests) = fake_api::client(move |method, uri, body| match method {
        // Listed by the parent's label until unlinked.
        "GET" if uri.starts_with("/api/v1/namespaces/ns/configmaps?") => {
            let items = if server.load(Ordering::SeqCst) {
                Vec::new()
            } else {
                vec![serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": linked(serde_json::json!({
                        "name": "team", "namespace": "ns", "uid": "uid-team",
                        "annotations": { crate::core::ON_DELETE_ANNOTATION: "orphan" },
                    })),
                })]
            };
            let list = serde_json::json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                "metadata": {}, "items": items,
            });
            (200, list)
        }
        "PATCH" if uri.starts_with("/api/v1/namespaces/ns/configmaps/team?") => {
            server.store(true, Ordering::SeqCst);
            (
                200,
                serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": {} }),
            )
        }
        "DELETE" => status(
            405,
            "MethodNotAllowed",
            "an orphaned child is never deleted",
        ),
        "POST" => (201, serde_json::from_str(body).unwrap()),
        _ => (200, serde_json::to_value(parent(&[])).unwrap()),
    });
    let engine = engine(client);
    let cx = Cx::new(
        CONTROL_CLUSTER,
        engine.plan.clone(),
        engine.runtime.clone(),
        0,
    );
    let verdict = engine
        .finalize(deleted_parent(Duration::from_secs(1)), &cx)
        .await;
    assert_eq!(verdict, Verdict::Done(Action::await_change()));
    assert!(unlinked.load(Ordering::SeqCst), "{:?}", requests.lines());
    assert!(released(&requests), "{:?}", requests.lines());
    let orphaned = (requests.all().into_iter())
        .filter(|s| s.uri.contains("/events"))
        .map(|s| serde_json::from_str::<serde_json::Value>(&s.body).unwrap())
        .find(|event| event["reason"] == "ChildrenOrphaned")
        .expect("a ChildrenOrphaned event");
    assert_eq!(orphaned["type"], "Normal");
    let note = orphaned["note"].as_str().unwrap();
    assert!(note.ends_with("in cluster-a: ConfigMap ns/team"), "{note}");
}
