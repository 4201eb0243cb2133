//! Applying, pruning and conflicts in one cluster, against a stand-in API server.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::ApiResource;

use super::*;
use crate::core::{ClusterState, PARENT_UID_LABEL, ParentRef};
use crate::engine::test_engine::FixedCache;
use crate::testing::fake_api::{self, status};

pub(crate) fn parent(uid: &str, name: &str) -> ParentRef {
    ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: name.into(),
        uid: uid.into(),
    }
}

/// A child's metadata as the cache or the server has it, linked to `parent` (and written by the controller)
/// when given.
pub(crate) fn child_meta(name: &str, parent: Option<&ParentRef>) -> ObjectMeta {
    let (labels, annotations) = match parent {
        Some(p) => {
            let (l, a) = p.stamp("app-deployer", "AppDeployment.demo/v1");
            (Some(l), Some(a))
        }
        None => (None, None),
    };
    let mut meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("uid-{name}")),
        labels,
        annotations,
        ..ObjectMeta::default()
    };
    crate::core::written_marker(&mut meta);
    meta
}

pub(crate) fn desired(name: &str) -> DesiredChild {
    DesiredChild {
        resource: ApiResource::erase::<Deployment>(&()),
        namespace: Some("ns".into()),
        name: name.into(),
        object: serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": name, "namespace": "ns" },
        }),
    }
}

fn watch(cached: Vec<ObjectMeta>) -> ChildWatch {
    ChildWatch {
        context: "cluster-a".into(),
        resource: ApiResource::erase::<Deployment>(&()),
        namespace: None,
        cache: Arc::new(FixedCache(cached)),
        answered: Arc::default(),
        applied: Arc::default(),
    }
}

/// Answers GETs from `existing` (404 otherwise) and accepts every write, but for an apply that only a
/// missing object lets through (409 when `existing` has the name), as an API server does.
pub(crate) fn server(existing: Vec<ObjectMeta>) -> (Client, fake_api::Requests) {
    fake_api::client(move |method, uri, body| {
        let name = uri.split('?').next().unwrap().rsplit('/').next().unwrap();
        let exists = existing.iter().any(|m| m.name.as_deref() == Some(name));
        match method {
            "PATCH" if exists && create_only(body) => status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on deployments.apps \"{name}\": the object has been modified"
                ),
            ),
            "GET" => match existing.iter().find(|m| m.name.as_deref() == Some(name)) {
                Some(meta) => (
                    200,
                    serde_json::json!({
                        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta,
                    }),
                ),
                None => status(
                    404,
                    "NotFound",
                    &format!("deployments.apps \"{name}\" not found"),
                ),
            },
            _ => (
                200,
                serde_json::json!({
                    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name, "namespace": "ns" },
                }),
            ),
        }
    })
}

/// Whether a request's body is an apply that only a missing object lets through.
pub(crate) fn create_only(body: &str) -> bool {
    let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    body["metadata"]["resourceVersion"] == "1"
}

pub(crate) async fn sync(
    client: Client,
    want: Vec<DesiredChild>,
    cached: Vec<ObjectMeta>,
    parent: &ParentRef,
) -> ClusterOutcome {
    sync_telling(client, want, cached, parent).await.0
}

/// As `sync`; also the events its changes call for, as (reason, message).
pub(crate) async fn sync_telling(
    client: Client,
    want: Vec<DesiredChild>,
    cached: Vec<ObjectMeta>,
    parent: &ParentRef,
) -> (ClusterOutcome, Vec<(&'static str, String)>) {
    sync_through(client, want, &watch(cached), parent).await
}

/// As `sync_telling`, through `watch` (which a test may sync through again).
pub(crate) async fn sync_through(
    client: Client,
    want: Vec<DesiredChild>,
    watch: &ChildWatch,
    parent: &ParentRef,
) -> (ClusterOutcome, Vec<(&'static str, String)>) {
    let link = Parentage {
        parent,
        controller: "app-deployer",
        parent_kind: "AppDeployment.demo/v1",
        metrics: &crate::metrics::Metrics::default(),
        conflicts: &Default::default(),
    };
    let changes = ChildChanges::default();
    let outcome = sync_context("cluster-a", client, want, &[watch], true, &link, &changes).await;
    let notes = changes.notes();
    (
        outcome,
        notes.into_iter().map(|n| (n.reason, n.message)).collect(),
    )
}

#[test]
fn what_is_applied_is_remembered_by_the_watch_of_the_childs_namespace_which_delivers_it() {
    let of = |namespace: Option<&str>| ChildWatch {
        namespace: namespace.map(str::to_owned),
        ..watch(Vec::new())
    };
    let (a, b, all) = (of(Some("ns-a")), of(Some("ns-b")), of(None));
    let mut child = desired("web");
    child.namespace = Some("ns-b".into());
    let chosen = store_of(&[&a, &b], &child).map(|w| w.namespace.as_deref());
    assert_eq!(chosen, Some(Some("ns-b")), "not the first of its kind");
    assert!(store_of(&[&a], &child).is_none());
    let chosen = store_of(&[&a, &all], &child).map(|w| w.namespace.as_deref());
    assert_eq!(
        chosen,
        Some(None),
        "a watch of every namespace delivers it too"
    );
}

#[tokio::test]
async fn children_no_longer_desired_are_pruned_by_uid_and_no_others() {
    let me = parent("uid-1", "crd-a");
    let other = parent("uid-2", "crd-b");
    let cached = vec![
        child_meta("keep", Some(&me)),
        child_meta("stale", Some(&me)),
        child_meta("not-mine", Some(&other)),
    ];
    let (client, requests) = server(Vec::new());
    let outcome = sync(client, vec![desired("keep")], cached, &me).await;
    assert_eq!(outcome.state, ClusterState::Applied);
    let deletes: Vec<fake_api::Seen> = requests
        .all()
        .into_iter()
        .filter(|s| s.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(deletes[0].uri.contains("/deployments/stale"), "{deletes:?}");
    let body: serde_json::Value = serde_json::from_str(&deletes[0].body).unwrap();
    assert_eq!(body["preconditions"]["uid"], "uid-stale");
}

#[tokio::test]
async fn a_failed_apply_names_the_child_and_the_servers_message_and_leaves_the_context_to_its_key()
{
    let me = parent("uid-1", "crd-a");
    let (client, _) = fake_api::client(|method, _, _| match method {
        "GET" => status(404, "NotFound", "not found"),
        _ => status(404, "NotFound", "namespaces \"ns\" not found"),
    });
    let outcome = sync(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Failed);
    assert_eq!(
        outcome.message.as_deref(),
        Some("applying Deployment ns/web: namespaces \"ns\" not found (404 NotFound)")
    );
}

#[tokio::test]
async fn a_child_the_server_refuses_does_not_stop_the_others_and_each_refusal_is_named() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = fake_api::client(|method, uri, _| {
        let name = uri.split('?').next().unwrap().rsplit('/').next().unwrap();
        match method {
            "GET" => status(404, "NotFound", "not found"),
            _ if name.starts_with("bad") => status(422, "Invalid", &format!("{name} is invalid")),
            _ => (
                200,
                serde_json::json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name } }),
            ),
        }
    });
    let want = vec![desired("bad-one"), desired("good"), desired("bad-two")];
    let outcome = sync(client, want, Vec::new(), &me).await;
    let applied: Vec<String> = (requests.all().into_iter())
        .filter(|s| s.method == "PATCH")
        .map(|s| s.uri.split('?').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        applied,
        [
            "/apis/apps/v1/namespaces/ns/deployments/bad-one",
            "/apis/apps/v1/namespaces/ns/deployments/good",
            "/apis/apps/v1/namespaces/ns/deployments/bad-two",
        ]
    );
    assert_eq!(outcome.state, ClusterState::Failed);
    assert_eq!(outcome.children, 1, "the one applied");
    assert_eq!(
        outcome.message.as_deref(),
        Some(
            "applying Deployment ns/bad-one: bad-one is invalid (422 Invalid); \
             applying Deployment ns/bad-two: bad-two is invalid (422 Invalid)"
        )
    );
}

#[tokio::test]
async fn a_namespace_declared_after_what_lives_in_it_is_applied_first() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(Vec::new());
    let namespace = DesiredChild {
        resource: ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        namespace: None,
        name: "ns".into(),
        object: serde_json::json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "ns" } }),
    };
    let outcome = sync(client, vec![desired("web"), namespace], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    let applied: Vec<String> = (requests.all().into_iter())
        .filter(|s| s.method == "PATCH")
        .map(|s| s.uri.split('?').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        applied,
        [
            "/api/v1/namespaces/ns",
            "/apis/apps/v1/namespaces/ns/deployments/web"
        ]
    );
}

/// A client whose server refuses every connection, counting the attempts.
fn refusing(attempts: Arc<std::sync::atomic::AtomicUsize>) -> Client {
    let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async {
            Err::<http::Response<http_body_util::Full<hyper::body::Bytes>>, _>(
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            )
        }
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn a_cluster_that_cannot_be_reached_stops_the_pass_at_the_first_child() {
    let me = parent("uid-1", "crd-a");
    let attempts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let client = refusing(attempts.clone());
    let cached = vec![child_meta("web", Some(&me)), child_meta("api", Some(&me))];
    let outcome = sync(client, vec![desired("web"), desired("api")], cached, &me).await;
    assert_eq!(outcome.state, ClusterState::Unreachable, "{outcome:?}");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "every other child would meet the same"
    );
}

/// Answers a child's apply with `generation` (and a resourceVersion), deletes as `delete` says.
pub(crate) fn applying(generation: i64, delete: u16) -> (Client, fake_api::Requests) {
    fake_api::client(move |method, uri, _| {
        let name = uri.split('?').next().unwrap().rsplit('/').next().unwrap();
        match method {
            "PATCH" => (
                200,
                serde_json::json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {
                        "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                        "generation": generation, "resourceVersion": "99",
                    },
                }),
            ),
            "DELETE" if delete == 200 => (
                200,
                serde_json::json!({ "kind": "Status", "status": "Success" }),
            ),
            "DELETE" => status(delete, "NotFound", "gone"),
            _ => status(404, "NotFound", "not found"),
        }
    })
}

pub(crate) fn cached_at(name: &str, parent: &ParentRef, generation: i64) -> ObjectMeta {
    ObjectMeta {
        generation: Some(generation),
        resource_version: Some("42".into()),
        ..child_meta(name, Some(parent))
    }
}

#[tokio::test]
async fn only_children_created_changed_or_deleted_are_told() {
    let me = parent("uid-1", "crd-a");
    // New: created.
    let (client, _) = applying(1, 200);
    let (_, told) = sync_telling(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(
        told,
        [(
            "ChildCreated",
            "created in cluster-a: Deployment ns/web".to_owned()
        )]
    );

    // Applied again as it was (the same generation; a status update changed its resourceVersion): nothing.
    let (client, _) = applying(3, 200);
    let cached = vec![cached_at("web", &me, 3)];
    let (outcome, told) = sync_telling(client, vec![desired("web")], cached, &me).await;
    assert_eq!(outcome.state, ClusterState::Applied);
    assert!(told.is_empty(), "an unchanged child is not told: {told:?}");

    // Someone changed it (or the parent did): the apply made a new generation.
    let (client, _) = applying(4, 200);
    let cached = vec![cached_at("web", &me, 3), cached_at("api", &me, 1)];
    let (_, told) = sync_telling(client, vec![desired("web"), desired("api")], cached, &me).await;
    assert_eq!(
        told,
        [(
            "ChildUpdated",
            "updated in cluster-a: Deployment ns/web, Deployment ns/api".to_owned()
        )]
    );

    // No longer desired: deleted, told; already gone: not told.
    let (client, _) = applying(3, 200);
    let cached = vec![cached_at("web", &me, 3), cached_at("old", &me, 1)];
    let (_, told) = sync_telling(client, vec![desired("web")], cached.clone(), &me).await;
    assert_eq!(
        told,
        [(
            "ChildPruned",
            "deleted (no longer desired) in cluster-a: Deployment ns/old".to_owned()
        )]
    );
    let (client, _) = applying(3, 404);
    let (_, told) = sync_telling(client, vec![desired("web")], cached, &me).await;
    assert!(told.is_empty(), "{told:?}");
}

#[test]
fn children_a_cut_off_sync_never_counted_are_counted_as_errors() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let parent = ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: "web".into(),
        uid: "uid-1".into(),
    };
    let link = Parentage {
        parent: &parent,
        controller: "app-deployer",
        parent_kind: "AppDeployment.demo/v1",
        metrics: &metrics,
        conflicts: &Default::default(),
    };
    let kinds = vec!["Deployment.apps/v1".to_owned(); 3];
    let unfinished = super::Unfinished {
        link: &link,
        context: "cluster-b",
        kinds,
        done: Default::default(),
    };
    unfinished.count("success");
    // The per-cluster cap drops the sync here: the two children it never reached are errors.
    drop(unfinished);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = |result: &str| {
        format!(
            r#"kubeplex_children_applied_total{{controller="app-deployer",cluster="cluster-b",kind="Deployment.apps/v1",result="{result}"}}"#
        )
    };
    assert!(text.contains(&format!("{} 1", series("success"))), "{text}");
    assert!(text.contains(&format!("{} 2", series("error"))), "{text}");
}

mod claims;
mod remembered;
