//! Applying, pruning and conflicts in one cluster, against a stand-in API server.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;

use super::*;
use crate::client::fake_api::{self, status};
use crate::engine::test_engine::FixedCache;

fn parent(uid: &str, name: &str) -> ParentRef {
    ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: name.into(),
        uid: uid.into(),
    }
}

/// A child's metadata as the cache or the server has it, linked to `parent` when given.
fn child_meta(name: &str, parent: Option<&ParentRef>) -> ObjectMeta {
    let (labels, annotations) = match parent {
        Some(p) => {
            let (l, a) = p.stamp("app-deployer", "AppDeployment.demo/v1");
            (Some(l), Some(a))
        }
        None => (None, None),
    };
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("uid-{name}")),
        labels,
        annotations,
        ..ObjectMeta::default()
    }
}

fn desired(name: &str) -> DesiredChild {
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
        cache: Arc::new(FixedCache(cached)),
    }
}

/// Answers GETs from `existing` (404 otherwise) and accepts every write.
fn server(existing: Vec<ObjectMeta>) -> (Client, fake_api::Requests) {
    fake_api::client(move |method, uri, _| {
        let name = uri.split('?').next().unwrap().rsplit('/').next().unwrap();
        match method {
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

async fn sync(
    client: Client,
    want: Vec<DesiredChild>,
    cached: Vec<ObjectMeta>,
    parent: &ParentRef,
) -> ContextOutcome {
    sync_telling(client, want, cached, parent).await.0
}

/// As `sync`; also the events its changes call for, as (reason, message).
async fn sync_telling(
    client: Client,
    want: Vec<DesiredChild>,
    cached: Vec<ObjectMeta>,
    parent: &ParentRef,
) -> (ContextOutcome, Vec<(&'static str, String)>) {
    let watch = watch(cached);
    let link = Parentage {
        parent,
        controller: "app-deployer",
        parent_kind: "AppDeployment.demo/v1",
        metrics: &crate::metrics::Metrics::default(),
    };
    let changes = ChildChanges::default();
    let outcome = sync_context("cluster-a", client, want, &[&watch], &link, &changes).await;
    let notes = changes.notes();
    (
        outcome,
        notes.into_iter().map(|n| (n.reason, n.message)).collect(),
    )
}

#[tokio::test]
async fn a_new_child_is_looked_up_once_then_applied_with_its_parent_link() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(Vec::new());
    let outcome = sync(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
    let lines = requests.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("GET /apis/apps/v1/namespaces/ns/deployments/web"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("PATCH /apis/apps/v1/namespaces/ns/deployments/web?"),
        "{lines:?}"
    );
    assert!(lines[1].contains("fieldManager=app-deployer") && lines[1].contains("force=true"));
    let body: serde_json::Value = serde_json::from_str(&requests.all()[1].body).unwrap();
    assert_eq!(body["metadata"]["labels"][PARENT_UID_LABEL], "uid-1");
    assert_eq!(
        body["metadata"]["annotations"][crate::core::PARENT_ANNOTATION],
        "control/crds/crd-a"
    );
}

#[tokio::test]
async fn a_cached_child_of_this_parent_is_applied_without_a_lookup() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(Vec::new());
    let outcome = sync(
        client,
        vec![desired("web")],
        vec![child_meta("web", Some(&me))],
        &me,
    )
    .await;
    assert_eq!(outcome.state, ClusterState::Ready);
    let lines = requests.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("PATCH "));
}

#[tokio::test]
async fn a_name_taken_by_another_parent_or_by_someone_else_is_a_conflict_and_left_alone() {
    let me = parent("uid-1", "crd-a");
    let other = parent("uid-2", "crd-b");
    // Another parent's child, in the controller's cache; a stranger's object, only on the server.
    let (client, requests) = server(vec![child_meta("stranger", None)]);
    let outcome = sync(
        client,
        vec![desired("taken"), desired("stranger"), desired("free")],
        vec![child_meta("taken", Some(&other))],
        &me,
    )
    .await;
    assert_eq!(outcome.state, ClusterState::Conflict, "{outcome:?}");
    assert_eq!(outcome.children, 1);
    let message = outcome.message.unwrap();
    assert!(
        message.contains(
            "Deployment ns/taken already exists and belongs to another parent (control/crds/crd-b)"
        ),
        "{message}"
    );
    assert!(
        message.contains("Deployment ns/stranger already exists and belongs to no kubeplex parent"),
        "{message}"
    );
    let writes: Vec<String> = requests
        .lines()
        .into_iter()
        .filter(|l| !l.starts_with("GET"))
        .collect();
    assert_eq!(writes.len(), 1, "only the free name is written: {writes:?}");
    assert!(writes[0].contains("/deployments/free?"));
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
    assert_eq!(outcome.state, ClusterState::Ready);
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
async fn deleting_a_child_that_is_gone_or_replaced_is_done() {
    for code in [404, 409] {
        let (client, _) = fake_api::client(move |_, _, _| status(code, "Gone", "gone"));
        let resource = ApiResource::erase::<Deployment>(&());
        assert!(
            delete(client, &resource, &child_meta("web", None))
                .await
                .is_ok(),
            "{code}"
        );
    }
    let (client, _) = fake_api::client(|_, _, _| status(403, "Forbidden", "no"));
    let resource = ApiResource::erase::<Deployment>(&());
    assert!(
        delete(client, &resource, &child_meta("web", None))
            .await
            .is_err()
    );
}

/// Someone deletes the child and creates another of the same name between the runtime's list and its
/// delete: the delete names the UID the list showed, so the server (as a real one does; see
/// `tests/runtime_cleanup.rs`) refuses it with 409, and the new object stays.
#[tokio::test]
async fn a_child_recreated_between_the_list_and_the_delete_is_not_deleted() {
    let current = Arc::new(parking_lot::Mutex::new(Some("uid-web".to_owned())));
    let server = current.clone();
    let (client, requests) = fake_api::client(move |method, _, body| {
        let mut current = server.lock();
        match method {
            "GET" => {
                let listed = child_meta("web", Some(&parent("uid-1", "crd-a")));
                // Replaced as soon as it was listed.
                *current = Some("uid-web-recreated".into());
                (
                    200,
                    serde_json::json!({
                        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                        "metadata": {},
                        "items": [{
                            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                            "metadata": listed,
                        }],
                    }),
                )
            }
            "DELETE" => {
                let sent: serde_json::Value = serde_json::from_str(body).unwrap();
                let precondition = sent["preconditions"]["uid"].as_str().map(str::to_owned);
                match (precondition, current.clone()) {
                    (Some(wanted), Some(actual)) if wanted != actual => status(
                        409,
                        "Conflict",
                        &format!(
                            "Operation cannot be fulfilled on deployments.apps \"web\": the UID in the precondition ({wanted}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
                        ),
                    ),
                    _ => {
                        *current = None;
                        (
                            200,
                            serde_json::json!({ "kind": "Status", "apiVersion": "v1", "status": "Success" }),
                        )
                    }
                }
            }
            _ => status(405, "MethodNotAllowed", "unexpected"),
        }
    });
    let targets = [(ApiResource::erase::<Deployment>(&()), Some("ns".to_owned()))];
    let metrics = crate::metrics::Metrics::default();
    let counted = (&metrics, "app-deployer");
    let outcome = remove_children("cluster-a", client, &targets, "uid-1", counted).await;
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
    assert_eq!(
        current.lock().as_deref(),
        Some("uid-web-recreated"),
        "the recreated child was deleted"
    );
    let deletes: Vec<fake_api::Seen> = requests
        .all()
        .into_iter()
        .filter(|s| s.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    let body: serde_json::Value = serde_json::from_str(&deletes[0].body).unwrap();
    assert_eq!(body["preconditions"]["uid"], "uid-web");
}

/// Answers a child's apply with `generation` (and a resourceVersion), deletes as `delete` says.
fn applying(generation: i64, delete: u16) -> (Client, fake_api::Requests) {
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

fn cached_at(name: &str, parent: &ParentRef, generation: i64) -> ObjectMeta {
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
    assert_eq!(outcome.state, ClusterState::Ready);
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
    };
    let kinds = vec!["Deployment.apps/v1".to_owned(); 3];
    let unfinished = super::Unfinished {
        link: &link,
        context: "cluster-b",
        kinds,
        done: Default::default(),
    };
    unfinished.count("success");
    // The per-context cap drops the sync here: the two children it never reached are errors.
    drop(unfinished);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = |result: &str| {
        format!(
            r#"kubeplex_children_applied_total{{controller="app-deployer",context="cluster-b",kind="Deployment.apps/v1",result="{result}"}}"#
        )
    };
    assert!(text.contains(&format!("{} 1", series("success"))), "{text}");
    assert!(text.contains(&format!("{} 2", series("error"))), "{text}");
}
