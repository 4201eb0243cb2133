//! Unlinking a child that its policy spares — kept once no longer declared, or orphaned when its parent is
//! deleted — instead of deleting it: its link labels go (see `core/ownership.rs`), so that no watch or
//! list of the controller finds it again, neither this replica's nor a successor's orphan sweep, and it
//! stays in its cluster as it is.

use kube::Client;
use kube::api::{ApiResource, ObjectMeta, Patch, PatchParams};

use super::requests::api;
use crate::core::unlink_patch;

/// Unlinks `child`, only if it is still the object seen (same UID): `true` when done, `false` when it was
/// gone already. Written with a merge patch under the controller's name (`manager`): server-side apply of
/// the link alone would also drop every field the controller applied.
pub(in crate::engine) async fn unlink(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
    manager: &str,
) -> Result<bool, kube::Error> {
    let api = api(client, resource, child.namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let patch = unlink_patch(child.uid.as_deref());
    match api
        .patch(
            child.name.as_deref().unwrap_or_default(),
            &params,
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    //! Children a policy spares, against a stand-in API server: kept when no longer declared (unlinked, not
    //! deleted, told), and taken back when declared again.

    use kube::api::ObjectMeta;

    use crate::core::ClusterState;
    use crate::core::ParentRef;
    use crate::engine::children::sync::tests::{
        applying, cached_at, child_meta, create_only, desired, parent, server, sync, sync_telling,
    };
    use crate::testing::fake_api::{self, status};

    /// `parent`'s child `name`, cached, whose prune policy keeps it.
    fn kept_at(name: &str, parent: &ParentRef) -> ObjectMeta {
        let mut meta = cached_at(name, parent, 1);
        let annotations = meta.annotations.get_or_insert_default();
        annotations.insert(crate::core::ON_PRUNE_ANNOTATION.into(), "keep".into());
        meta
    }

    #[tokio::test]
    async fn a_child_no_longer_desired_that_its_policy_keeps_is_unlinked_not_deleted_and_told() {
        let me = parent("uid-1", "crd-a");
        let cached = vec![
            cached_at("web", &me, 3),
            kept_at("team", &me),
            cached_at("old", &me, 1),
        ];
        let (client, requests) = applying(3, 200);
        let (outcome, told) = sync_telling(client, vec![desired("web")], cached, &me).await;
        assert_eq!(outcome.state, ClusterState::Applied, "{outcome:?}");
        assert_eq!(outcome.children, 1);
        assert_eq!(
            outcome.message.as_deref(),
            Some("1 child kept (no longer declared; left in place, unlinked): Deployment ns/team")
        );
        let writes: Vec<(String, String)> = (requests.all().into_iter())
            .filter(|s| s.method != "GET")
            .map(|s| {
                (
                    s.method,
                    s.uri.split('?').next().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let path = |name: &str| format!("/apis/apps/v1/namespaces/ns/deployments/{name}");
        assert_eq!(
            writes,
            [
                ("PATCH".to_owned(), path("web")),
                ("PATCH".to_owned(), path("team")),
                ("DELETE".to_owned(), path("old")),
            ]
        );
        let unlink = &requests.all()[1];
        let body: serde_json::Value = serde_json::from_str(&unlink.body).unwrap();
        assert_eq!(body["metadata"]["uid"], "uid-team");
        assert!(body["metadata"]["labels"][crate::core::CONTROLLER_LABEL].is_null());
        assert_eq!(
        told,
        [
            (
                "ChildPruned",
                "deleted (no longer desired) in cluster-a: Deployment ns/old".to_owned()
            ),
            (
                "ChildrenKept",
                "kept, unlinked and left in place (no longer declared; prune policy keep) in cluster-a: Deployment ns/team"
                    .to_owned()
            ),
        ]
    );
        // Gone already: nothing kept, nothing told.
        let (client, _) = fake_api::client(|_, _, _| status(404, "NotFound", "gone"));
        let (outcome, told) =
            sync_telling(client, Vec::new(), vec![kept_at("team", &me)], &me).await;
        assert_eq!(
            (outcome.state, outcome.message),
            (ClusterState::NotTargeted, None)
        );
        assert!(told.is_empty(), "{told:?}");
    }

    #[tokio::test]
    async fn a_child_unlinked_from_this_parent_or_its_predecessor_is_taken_back_and_no_other() {
        let me = parent("uid-1", "crd-a");
        let unlinked = |name: &str, from: &ParentRef| ObjectMeta {
            labels: None,
            ..child_meta(name, Some(from))
        };
        // Kept by this parent; orphaned by the parent of this name before it (another UID); another's.
        let (client, requests) = server(vec![
            unlinked("kept", &me),
            unlinked("orphaned", &parent("uid-0", "crd-a")),
            unlinked("others", &parent("uid-2", "crd-b")),
        ]);
        let want = vec![desired("kept"), desired("orphaned"), desired("others")];
        let outcome = sync(client, want, Vec::new(), &me).await;
        assert_eq!(outcome.state, ClusterState::Conflict, "{outcome:?}");
        assert_eq!(outcome.children, 2);
        assert_eq!(
            outcome.message.as_deref(),
            Some(
                "Deployment ns/others already exists and belongs to no kubeplex parent (another parent, control/crds/crd-b, left it in place)"
            )
        );
        // Each name was tried by an apply that only a free name lets through, then read; the two taken back
        // were applied.
        let applied: Vec<String> = (requests.all().into_iter())
            .filter(|s| s.method == "PATCH" && !create_only(&s.body))
            .map(|s| s.uri)
            .collect();
        assert_eq!(applied.len(), 2, "{applied:?}");
        assert!(applied[0].contains("/deployments/kept?"), "{applied:?}");
        assert!(applied[1].contains("/deployments/orphaned?"), "{applied:?}");
    }
}
