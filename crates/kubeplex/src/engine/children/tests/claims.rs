//! Whose a child's name is: a new child created by one apply that only a free name lets through, one
//! applied a moment ago pinned to its UID, one not cached yet read after the server refused the create.

use super::*;

#[tokio::test]
async fn a_new_child_is_created_by_one_apply_that_only_a_free_name_lets_through() {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = server(Vec::new());
    let (outcome, told) = sync_telling(client, vec![desired("web")], Vec::new(), &me).await;
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
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
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
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
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
    assert_eq!(told.len(), 1, "created");
    let (outcome, told) = sync_for(&me).await;
    assert_eq!(outcome.state, ClusterState::Ready, "{outcome:?}");
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
