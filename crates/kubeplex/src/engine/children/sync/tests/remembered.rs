//! A child still as this controller last applied it is not applied again.

use super::*;

/// Syncs `want` against a cache holding `web` at `version`, with what was applied remembered in `applied`,
/// in a cluster `live` or not; the stand-in server answers an apply with `web` at `answered`. The requests
/// sent.
async fn sync_remembering(
    applied: &Arc<crate::engine::children::applied::Applied>,
    want: DesiredChild,
    version: &str,
    answered: &'static str,
    live: bool,
) -> Vec<String> {
    let me = parent("uid-1", "crd-a");
    let (client, requests) = fake_api::client(move |_, _, _| {
        (
            200,
            serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": "web", "namespace": "ns", "uid": "uid-web", "resourceVersion": answered },
            }),
        )
    });
    let mut cached = child_meta("web", Some(&me));
    cached.resource_version = Some(version.into());
    let watch = ChildWatch {
        applied: Arc::clone(applied),
        ..watch(vec![cached])
    };
    let link = Parentage {
        parent: &me,
        controller: "app-deployer",
        parent_kind: "AppDeployment.demo/v1",
        metrics: &crate::metrics::Metrics::default(),
        conflicts: &Default::default(),
    };
    let changes = ChildChanges::default();
    let outcome = sync_context(
        "cluster-a",
        client,
        vec![want],
        &[&watch],
        live,
        &link,
        &changes,
    )
    .await;
    assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
    assert_eq!(outcome.children, 1, "{outcome:?}");
    requests.lines()
}

#[tokio::test]
async fn a_child_unwritten_since_the_same_apply_is_not_applied_again() {
    let applied = Arc::default();
    let first = sync_remembering(&applied, desired("web"), "5", "5", true).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].starts_with("PATCH "), "{first:?}");
    // The cache still shows the version that apply returned, and the same object is wanted.
    let again = sync_remembering(&applied, desired("web"), "5", "5", true).await;
    assert!(again.is_empty(), "{again:?}");
    // Someone wrote the child since: its version moved, and the apply repairs it.
    let written = sync_remembering(&applied, desired("web"), "6", "7", true).await;
    assert_eq!(written.len(), 1, "{written:?}");
    let repaired = sync_remembering(&applied, desired("web"), "7", "7", true).await;
    assert!(repaired.is_empty(), "{repaired:?}");
    // The parent wants another object now.
    let mut changed = desired("web");
    changed.object["spec"] = serde_json::json!({ "replicas": 3 });
    let reapplied = sync_remembering(&applied, changed.clone(), "7", "8", true).await;
    assert_eq!(reapplied.len(), 1, "{reapplied:?}");
    // A cluster that does not answer now: its cache may be stale, and the apply finds out.
    let unsure = sync_remembering(&applied, changed, "8", "8", false).await;
    assert_eq!(unsure.len(), 1, "{unsure:?}");
}
