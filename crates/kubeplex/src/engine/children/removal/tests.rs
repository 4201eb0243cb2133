//! Removing a deleted parent's children in one cluster, against a stand-in API server: what counts as
//! gone, what is waited for, and the order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::core::ClusterState;
use crate::engine::children::sync::tests::{child_meta, parent};
use crate::testing::fake_api::{self, status};

/// A metadata list of these children.
fn list(items: &[ObjectMeta]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = (items.iter())
        .map(|meta| {
            serde_json::json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta,
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {},
        "items": items,
    })
}

/// What a server answers a delete that deleted the object.
fn deleted() -> (u16, serde_json::Value) {
    let status = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "status": "Success" });
    (200, status)
}

/// `parent`'s child `name` (a ConfigMap in `ns`), deleted and kept by `example.com/hold`.
fn held(name: &str) -> ObjectMeta {
    ObjectMeta {
        deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        finalizers: Some(vec!["example.com/hold".into()]),
        ..child_meta(name, Some(&parent("uid-1", "crd-a")))
    }
}

async fn remove_all_of(client: Client, places: &[ChildPlace]) -> crate::core::ClusterOutcome {
    remove_telling(client, places).await.0
}

/// As `remove_all_of`; also the events the children orphaned call for, as (reason, message).
async fn remove_telling(
    client: Client,
    places: &[ChildPlace],
) -> (crate::core::ClusterOutcome, Vec<(&'static str, String)>) {
    let metrics = crate::metrics::Metrics::default();
    let changes = ChildChanges::default();
    let conflicts = Conflicts::default();
    let counted = (&metrics, "app-deployer", &conflicts);
    let parent = parent("uid-1", "crd-a");
    let outcome = remove_children(
        "cluster-a",
        client,
        places,
        &parent,
        counted,
        &changes,
        &Default::default(),
    )
    .await;
    let notes = changes.notes().into_iter();
    (outcome, notes.map(|n| (n.reason, n.message)).collect())
}

fn config_maps() -> Vec<ChildPlace> {
    vec![ChildPlace::of(
        ApiResource::erase::<ConfigMap>(&()),
        Some("ns"),
    )]
}

#[tokio::test]
async fn a_child_whose_delete_was_accepted_but_that_is_still_there_holds_the_deletion() {
    let lists = Arc::new(AtomicUsize::new(0));
    let counted = lists.clone();
    let (client, requests) = fake_api::client(move |method, _, _| match method {
        // The first list finds it as it was; the delete is answered with the object, kept by its
        // finalizer; the second list still has it.
        "GET" if counted.fetch_add(1, Ordering::SeqCst) == 0 => (
            200,
            list(&[child_meta("held", Some(&parent("uid-1", "crd-a")))]),
        ),
        "GET" => (200, list(&[held("held")])),
        "DELETE" => (
            200,
            serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": held("held") }),
        ),
        _ => status(405, "MethodNotAllowed", "unexpected"),
    });
    let outcome = remove_all_of(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleting, "{outcome:?}");
    assert_eq!(outcome.children, 1);
    assert_eq!(
        outcome.message.as_deref(),
        Some(
            "waiting for children to go: ConfigMap ns/held (Terminating; finalizers: example.com/hold)"
        )
    );
    let methods: Vec<String> = requests.all().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, ["GET", "DELETE", "GET"]);
}

#[tokio::test]
async fn a_child_already_going_is_not_deleted_again_and_counts_as_removed_once_no_list_has_it() {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = gone.clone();
    let (client, requests) = fake_api::client(move |method, _, _| match method {
        "GET" if server.load(Ordering::SeqCst) => (200, list(&[])),
        "GET" => (200, list(&[held("held")])),
        _ => status(405, "MethodNotAllowed", "unexpected"),
    });
    let outcome = remove_all_of(client.clone(), &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleting, "{outcome:?}");

    // Its finalizer was removed: the next pass finds nothing left.
    gone.store(true, Ordering::SeqCst);
    let outcome = remove_all_of(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
    assert!(
        requests.all().iter().all(|s| s.method == "GET"),
        "a child already going is deleted again: {:?}",
        requests.lines()
    );
}

#[tokio::test]
async fn a_child_the_server_says_it_deleted_is_gone_without_a_second_look() {
    let (client, requests) = fake_api::client(|method, _, _| match method {
        "GET" => (
            200,
            list(&[child_meta("web", Some(&parent("uid-1", "crd-a")))]),
        ),
        "DELETE" => deleted(),
        _ => status(405, "MethodNotAllowed", "unexpected"),
    });
    let outcome = remove_all_of(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
    assert_eq!(requests.lines().len(), 2, "{:?}", requests.lines());
}

#[tokio::test]
async fn kinds_are_deleted_in_the_reverse_of_the_apply_order_and_a_refused_delete_skips_none() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = fake_api::client(move |method, uri, _| {
        let path = uri.split('?').next().unwrap_or_default();
        match method {
            "GET" if path == "/api/v1/namespaces" => (
                200,
                list(&[ObjectMeta {
                    namespace: None,
                    ..child_meta("team", Some(&me))
                }]),
            ),
            "GET" => (200, list(&[child_meta("settings", Some(&me))])),
            // The ConfigMap's delete is refused; the namespace is deleted all the same.
            "DELETE" if path.contains("/configmaps/") => status(403, "Forbidden", "not allowed"),
            "DELETE" => deleted(),
            _ => status(405, "MethodNotAllowed", "unexpected"),
        }
    });
    // Declared namespace first, as a plan would.
    let places = [
        ChildPlace::of(ApiResource::erase::<Namespace>(&()), None),
        ChildPlace::of(ApiResource::erase::<ConfigMap>(&()), Some("ns")),
    ];
    let outcome = remove_all_of(client, &places).await;
    let deletes: Vec<String> = (requests.all().into_iter())
        .filter(|s| s.method == "DELETE")
        .map(|s| s.uri.split('?').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        deletes,
        [
            "/api/v1/namespaces/ns/configmaps/settings",
            "/api/v1/namespaces/team"
        ]
    );
    assert_eq!(outcome.state, ClusterState::Failed, "{outcome:?}");
    assert_eq!(
        outcome.message.as_deref(),
        Some("deleting ConfigMap settings: not allowed (403 Forbidden)")
    );
}

#[tokio::test]
async fn deleting_a_child_that_is_gone_or_replaced_is_done() {
    for code in [404, 409] {
        let (client, _) = fake_api::client(move |_, _, _| status(code, "Gone", "gone"));
        let resource = ApiResource::erase::<Deployment>(&());
        let removed = remove(client, &resource, &child_meta("web", None), "app-deployer").await;
        assert_eq!(removed.ok(), Some(Removed::Deleted), "{code}");
    }
    let (client, _) = fake_api::client(|_, _, _| status(403, "Forbidden", "no"));
    let resource = ApiResource::erase::<Deployment>(&());
    let removed = remove(client, &resource, &child_meta("web", None), "app-deployer").await;
    assert!(removed.is_err());
}

/// `parent`'s child `name` (a ConfigMap in `ns`), whose delete policy orphans it.
fn orphan_policy(name: &str) -> ObjectMeta {
    let mut meta = child_meta(name, Some(&parent("uid-1", "crd-a")));
    let annotations = meta.annotations.get_or_insert_default();
    annotations.insert(crate::core::ON_DELETE_ANNOTATION.into(), "orphan".into());
    meta
}

/// Answers a list with `children` (an empty one once `unlinked`, as a list by the parent's label would),
/// deletes, and patches (recording that it did).
fn policy_server(children: Vec<ObjectMeta>) -> (Client, fake_api::Requests) {
    fake_api::client(move |method, _, _| match method {
        "GET" => (200, list(&children)),
        "DELETE" => deleted(),
        "PATCH" => (
            200,
            serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x" } }),
        ),
        _ => status(405, "MethodNotAllowed", "unexpected"),
    })
}

/// The PATCHes sent, as (path, body).
fn patches(requests: &fake_api::Requests) -> Vec<(String, serde_json::Value)> {
    (requests.all().into_iter())
        .filter(|s| s.method == "PATCH")
        .map(|s| {
            let path = s.uri.split('?').next().unwrap_or_default().to_owned();
            (path, serde_json::from_str(&s.body).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_child_whose_delete_policy_orphans_it_is_unlinked_and_left_while_its_sibling_is_deleted()
{
    let (client, requests) = policy_server(vec![
        orphan_policy("team"),
        child_meta("web", Some(&parent("uid-1", "crd-a"))),
    ]);
    let (outcome, notes) = remove_telling(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
    assert_eq!(
        outcome.message.as_deref(),
        Some("1 child left in place, unlinked (delete policy orphan): ConfigMap ns/team")
    );
    let deletes: Vec<String> = (requests.all().into_iter())
        .filter(|s| s.method == "DELETE")
        .map(|s| s.uri.split('?').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(deletes, ["/api/v1/namespaces/ns/configmaps/web"]);
    let patches = patches(&requests);
    assert_eq!(patches.len(), 1, "{patches:?}");
    let (path, body) = &patches[0];
    assert_eq!(path, "/api/v1/namespaces/ns/configmaps/team");
    assert_eq!(body["metadata"]["uid"], "uid-team", "only the child listed");
    assert!(body["metadata"]["labels"][crate::core::PARENT_UID_LABEL].is_null());
    assert!(body["metadata"]["labels"][crate::core::CONTROLLER_LABEL].is_null());
    let line = requests
        .lines()
        .into_iter()
        .find(|l| l.starts_with("PATCH"));
    assert!(
        line.as_deref()
            .unwrap_or_default()
            .contains("fieldManager=app-deployer"),
        "{line:?}"
    );
    assert_eq!(
        notes,
        [(
            "ChildrenOrphaned",
            "orphaned, unlinked and left in place (the parent is deleted; delete policy orphan) in cluster-a: ConfigMap ns/team"
                .to_owned()
        )]
    );
}

#[tokio::test]
async fn a_child_already_going_that_its_policy_orphans_is_unlinked_not_waited_for() {
    let going = ObjectMeta {
        deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        finalizers: Some(vec!["example.com/hold".into()]),
        ..orphan_policy("team")
    };
    let (client, requests) = policy_server(vec![going]);
    let outcome = remove_all_of(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
    let methods: Vec<String> = requests.all().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, ["GET", "PATCH"]);
}

#[tokio::test]
async fn removing_a_child_of_a_gone_parent_honours_its_delete_policy() {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let (client, requests) = policy_server(Vec::new());
    let removed = remove(client, &resource, &orphan_policy("team"), "app-deployer").await;
    assert_eq!(removed.ok(), Some(Removed::Orphaned));
    let methods: Vec<String> = requests.all().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, ["PATCH"], "unlinked, not deleted");
    // Gone already: nothing to unlink, done.
    let (client, _) = fake_api::client(|_, _, _| status(404, "NotFound", "gone"));
    let removed = remove(client, &resource, &orphan_policy("team"), "app-deployer").await;
    assert_eq!(removed.ok(), Some(Removed::Orphaned));
}

/// Someone deletes the child and creates another of the same name between the runtime's list and its
/// delete: the delete names the UID the list showed, so the server (as a real one does; see
/// `tests/runtime/cleanup.rs`) refuses it with 409, and the new object stays.
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
    let places = [ChildPlace::of(
        ApiResource::erase::<Deployment>(&()),
        Some("ns"),
    )];
    let metrics = crate::metrics::Metrics::default();
    let conflicts = Conflicts::default();
    let counted = (&metrics, "app-deployer", &conflicts);
    let changes = ChildChanges::default();
    let parent = parent("uid-1", "crd-a");
    let outcome = remove_children(
        "cluster-a",
        client,
        &places,
        &parent,
        counted,
        &changes,
        &Default::default(),
    )
    .await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
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

#[tokio::test]
async fn an_object_with_the_parents_uid_label_naming_another_parent_is_not_removed_with_it() {
    // Listed by the deleted parent's UID label: its child, and an object whose annotation names another.
    let forged = child_meta("forged", Some(&parent("uid-1", "crd-ghost")));
    let children = [child_meta("web", Some(&parent("uid-1", "crd-a"))), forged];
    let (client, requests) = fake_api::client(move |method, _, _| match method {
        "GET" => (200, list(&children)),
        "DELETE" => deleted(),
        _ => status(405, "MethodNotAllowed", "unexpected"),
    });
    let outcome = remove_all_of(client, &config_maps()).await;
    assert_eq!(outcome.state, ClusterState::Deleted, "{outcome:?}");
    let deletes: Vec<String> = (requests.lines().into_iter())
        .filter(|l| l.starts_with("DELETE"))
        .collect();
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(deletes[0].contains("/configmaps/web"), "{deletes:?}");
}

#[tokio::test]
async fn the_namespaces_of_one_kind_are_emptied_at_once() {
    // Each list is answered only once both namespaces' lists have arrived: one after the other, the first
    // would never be answered.
    let arrived = Arc::new(tokio::sync::Barrier::new(2));
    let client = fake_api::answered_by(move |seen| {
        let arrived = arrived.clone();
        async move {
            if seen.method == "GET" {
                arrived.wait().await;
                return (200, list(&[]));
            }
            deleted()
        }
    });
    let resource = ApiResource::erase::<ConfigMap>(&());
    let places = [
        ChildPlace::of(resource.clone(), Some("ns-a")),
        ChildPlace::of(resource, Some("ns-b")),
    ];
    let removed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        remove_all_of(client, &places),
    );
    let outcome = removed.await.expect("both lists in flight at once");
    assert_eq!(outcome.state, ClusterState::Deleted);
}
