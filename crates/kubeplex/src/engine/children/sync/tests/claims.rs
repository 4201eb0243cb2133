//! Whose a child's name is: a new child created by one apply that only a free name lets through, one
//! applied a moment ago pinned to its UID, one not cached yet read after the server refused the create, a
//! cached one applied at once, and a name taken by someone else left alone: one that names the parent but
//! was not written by the controller, or whose labels and annotations name different parents, too.

use super::*;

#[tokio::test]
async fn a_new_child_is_created_by_one_apply_that_only_a_free_name_lets_through() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(Vec::new());
    let (outcome, told) = sync_telling(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    let lines = requests.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("PATCH /apis/apps/v1/namespaces/ns/deployments/web?"),
        "{lines:?}"
    );
    assert!(lines[0].contains("fieldManager=app-deployer") && lines[0].contains("force=true"));
    let body = &requests.all()[0].body;
    assert!(create_only(body), "{body}");
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["metadata"]["labels"][PARENT_UID_LABEL], "uid-1");
    assert_eq!(
        body["metadata"]["annotations"][crate::core::PARENT_ANNOTATION],
        "control/crds/crd-a"
    );
    let created = "created in cluster-a: Deployment ns/web".to_owned();
    assert_eq!(told, [("ChildCreated", created)]);
}

#[tokio::test]
async fn a_child_of_this_parent_not_cached_yet_is_read_after_the_refused_create_then_applied() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(vec![child_meta("web", Some(&me))]);
    let (outcome, told) = sync_telling(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    let seen = requests.all();
    let steps: Vec<(&str, bool)> = (seen.iter())
        .map(|s| (s.method.as_str(), create_only(&s.body)))
        .collect();
    assert_eq!(
        steps,
        [("PATCH", true), ("GET", false), ("PATCH", false)],
        "{:?}",
        requests.lines()
    );
    // It was there before: not told as created.
    assert!(
        told.iter().all(|(reason, _)| *reason != "ChildCreated"),
        "{told:?}"
    );
}

/// Answers every apply with the child `web` of UID `uid-web` at resourceVersion `5`.
fn answering_web() -> (Client, fake_api::Requests) {
    fake_api::client(|_, _, _| {
        (
            200,
            serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "namespace": "ns", "uid": "uid-web", "resourceVersion": "5" },
            }),
        )
    })
}

#[tokio::test]
async fn a_child_applied_a_moment_ago_for_this_parent_is_applied_again_pinned_to_its_uid() {
    let me = parent("uid-1", "crd-a");
    let other = parent("uid-2", "crd-b");
    let (client, requests) = answering_web();
    // One watch for every sync: it has not delivered `web` yet, but remembers what its applies answered.
    let watch = watch(Vec::new());
    let sync_for = async |parent: &ParentRef| {
        sync_through(client.clone(), vec![desired("web")], &watch, parent).await
    };
    let (outcome, told) = sync_for(&me).await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    assert_eq!(told.len(), 1, "created");
    let (outcome, told) = sync_for(&me).await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    assert!(
        told.is_empty(),
        "the same object, unchanged: nothing to tell"
    );
    // Another parent wanting the name is not let in on it: its apply is one only a free name passes.
    sync_for(&other).await;

    let bodies: Vec<serde_json::Value> = (requests.all().iter())
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect();
    let preconditions: Vec<(&str, &str)> = (bodies.iter())
        .map(|b| {
            let meta = &b["metadata"];
            (
                meta["resourceVersion"].as_str().unwrap_or_default(),
                meta["uid"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(preconditions, [("1", ""), ("", "uid-web"), ("1", "")]);
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
    assert_eq!(outcome.state, ClusterState::Applied);
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
    // The stranger's name was only tried by the apply that a taken name refuses, then read; the name
    // taken in the cache not even tried.
    let writes: Vec<(String, bool)> = (requests.all().into_iter())
        .filter(|s| s.method == "PATCH")
        .map(|s| {
            (
                s.uri.split('?').next().unwrap().to_owned(),
                create_only(&s.body),
            )
        })
        .collect();
    let at = |name: &str| format!("/apis/apps/v1/namespaces/ns/deployments/{name}");
    assert_eq!(
        writes,
        [(at("stranger"), true), (at("free"), true)],
        "only the free name is written"
    );
}

/// `name` as `parent`'s child, but not written by the controller: made in advance by someone else.
fn pre_made(name: &str, parent: &ParentRef) -> ObjectMeta {
    let mut meta = child_meta(name, Some(parent));
    meta.managed_fields = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
            manager: Some("kubectl-create".into()),
            ..Default::default()
        },
    ]);
    meta
}

#[tokio::test]
async fn an_object_naming_this_parent_that_the_controller_never_wrote_is_not_adopted() {
    let me = parent("uid-1", "crd-a");
    // One in the controller's cache (it carries the controller's label), one only on the server.
    let (client, requests) = server(vec![pre_made("on-server", &me)]);
    let outcome = sync(
        client,
        vec![desired("cached"), desired("on-server")],
        vec![pre_made("cached", &me)],
        &me,
    )
    .await;
    assert_eq!(outcome.state, ClusterState::Conflict, "{outcome:?}");
    let message = outcome.message.unwrap();
    for name in ["cached", "on-server"] {
        let taken = format!(
            "Deployment ns/{name} already exists and belongs to someone else (it names this parent, but app-deployer is not among its field managers)"
        );
        assert!(message.contains(&taken), "{message}");
    }
    // Only the apply that a taken name refuses was sent, and the read after it: nothing was written.
    let steps: Vec<(String, bool)> = (requests.all().into_iter())
        .map(|s| (s.method, create_only(&s.body)))
        .collect();
    let expected = [("PATCH".to_owned(), true), ("GET".to_owned(), false)];
    assert_eq!(steps, expected, "{:?}", requests.lines());
}

#[tokio::test]
async fn an_object_whose_uid_label_and_annotation_name_different_parents_is_a_conflict() {
    let me = parent("uid-1", "crd-a");
    // This parent's UID, another parent's name: written by the controller or not, it is no one's child.
    let forged = child_meta("web", Some(&parent("uid-1", "crd-ghost")));
    let (client, requests) = server(Vec::new());
    let outcome = sync(client, vec![desired("web")], vec![forged.clone()], &me).await;
    assert_eq!(outcome.state, ClusterState::Conflict, "{outcome:?}");
    let message = outcome.message.unwrap();
    assert!(
        message.contains(
            "its UID label is this parent's, its annotation names control/crds/crd-ghost"
        ),
        "{message}"
    );
    assert_eq!(requests.lines(), Vec::<String>::new(), "not written");

    // Not wanted by name: it is not pruned either, but reported.
    let (client, requests) = server(Vec::new());
    let outcome = sync(client, vec![desired("other")], vec![forged], &me).await;
    assert_eq!(outcome.state, ClusterState::Conflict, "{outcome:?}");
    let message = outcome.message.unwrap();
    assert!(
        message.contains("Deployment ns/web is not this parent's"),
        "{message}"
    );
    let lines = requests.lines();
    assert!(
        lines.iter().all(|l| !l.contains("/deployments/web")),
        "{lines:?}"
    );
}
