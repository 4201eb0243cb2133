//! A shared child's parents joining and letting go (see `core/sharing.rs`). Joining adds the parent's own
//! keys; letting go removes them while another parent remains, and otherwise does what the child's policy
//! says — deletes it, or leaves it in place unlinked — under a precondition on its resourceVersion, so that
//! a parent joining meanwhile is never deleted from under: the server refuses, and the child is read again.

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams,
    Preconditions,
};

use super::requests::api;
use crate::core::{ParentRef, sharing_parents, written_by};

/// How many times letting go reads the child again when another parent changed it meanwhile.
const ATTEMPTS: usize = 4;

/// What letting go of a shared child did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// Other parents still share it: this parent's keys went, the child stays.
    Left,
    /// The last parent: deleted.
    Deleted,
    /// The last parent: its delete accepted (or under way already), the object kept a while yet
    /// (finalizers, a grace period).
    Deleting,
    /// The last parent, whose policy spares it: unlinked and left in place.
    Unlinked,
    /// Gone already, replaced by another object, or no longer naming this parent.
    NotThere,
}

/// Creates `object`, a shared child, naming `parent` from the start (no moment where it names no parent):
/// `None` when its name is taken. A create, not an apply: the parents' keys must stay out of what the
/// controller's apply owns, or the next parent's apply would drop them.
pub(crate) async fn create(
    api: &Api<DynamicObject>,
    manager: &str,
    parent: &ParentRef,
    object: &serde_json::Value,
) -> kube::Result<Option<DynamicObject>> {
    let mut object = object.clone();
    let (labels, annotations) = parent.sharing_stamp();
    for (field, stamp) in [("labels", labels), ("annotations", annotations)] {
        for (key, value) in stamp {
            object["metadata"][field][key] = serde_json::Value::String(value);
        }
    }
    let object: DynamicObject = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &object).await {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(error) => Err(error),
    }
}

/// Records `parent` on the shared child `child` (as the cache or the server had it), unless it is there:
/// the child as it is after, `None` when it was recorded already.
pub(crate) async fn join(
    api: &Api<DynamicObject>,
    manager: &str,
    parent: &ParentRef,
    child: &ObjectMeta,
) -> kube::Result<Option<ObjectMeta>> {
    if parent.shares(child) {
        return Ok(None);
    }
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let patch = parent.join_patch(child.uid.as_deref());
    let name = child.name.as_deref().unwrap_or_default();
    let joined = api
        .patch_metadata(name, &params, &Patch::Merge(&patch))
        .await?;
    Ok(Some(joined.metadata))
}

/// Lets go of the shared child `child` for `parent`: leaves it to the other parents, or, as the last,
/// deletes it — or unlinks it when `spare` (its policy keeps or orphans it). Read from the server first:
/// the cache may not show a parent that joined a moment ago.
pub(crate) async fn release(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
    parent: &ParentRef,
    manager: &str,
    spare: bool,
) -> kube::Result<Released> {
    let api = api(client, resource, child.namespace.as_deref());
    let name = child.name.as_deref().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(found) = api.get_metadata_opt(name).await? else {
            return Ok(Released::NotThere);
        };
        let found = found.metadata;
        // Its labels alone, which anyone who may write the object chooses, never make it this parent's.
        if found.uid != child.uid || !parent.shares(&found) || !written_by(&found, manager) {
            return Ok(Released::NotThere);
        }
        let others = sharing_parents(&found).iter().any(|p| p != parent);
        let done = if others {
            let patch = parent.leave_patch(found.uid.as_deref());
            let patch = Patch::Merge(&patch);
            let left = api.patch_metadata(name, &params, &patch).await;
            left.map(|_| Released::Left)
        } else if found.deletion_timestamp.is_some() {
            return Ok(Released::Deleting);
        } else if spare {
            let patch = parent.last_unlink_patch(&found);
            let patch = Patch::Merge(&patch);
            let unlinked = api.patch_metadata(name, &params, &patch).await;
            unlinked.map(|_| Released::Unlinked)
        } else {
            let delete = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: found.uid.clone(),
                    resource_version: found.resource_version.clone(),
                }),
                ..DeleteParams::background()
            };
            match api.delete(name, &delete).await {
                Ok(answer) if answer.is_right() => Ok(Released::Deleted),
                Ok(_) => Ok(Released::Deleting),
                Err(error) => Err(error),
            }
        };
        match done {
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Released::NotThere),
            // Changed since it was read (another parent joined or left): read it again.
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < ATTEMPTS => continue,
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Letting go of a shared child, against a stand-in API server: left to the others, deleted or unlinked
    //! by the last, and read again when another parent changed it between the read and the write.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::engine::children::sync::tests::parent;
    use crate::testing::fake_api::{self, status};

    /// The shared child `settings` (UID `c-1`) at `version`, naming `parents`.
    fn shared(version: &str, parents: &[&ParentRef]) -> ObjectMeta {
        let mut child = serde_json::json!({ "metadata": {
            "name": "settings", "namespace": "apps", "uid": "c-1", "resourceVersion": version,
            "labels": { crate::core::CONTROLLER_LABEL: "placer", crate::core::SHARED_LABEL: "true" },
            "managedFields": [{ "manager": "placer", "operation": "Apply" }],
        }});
        for parent in parents {
            json_patch::merge(&mut child, &parent.join_patch(Some("c-1")));
        }
        serde_json::from_value(child["metadata"].clone()).unwrap()
    }

    fn answer(meta: &ObjectMeta) -> (u16, serde_json::Value) {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
        });
        (200, object)
    }

    async fn release_of(client: kube::Client, me: &ParentRef, spare: bool) -> Released {
        let resource = ApiResource::erase::<ConfigMap>(&());
        let seen = shared("5", &[me]);
        release(client, &resource, &seen, me, "placer", spare)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_last_parent_reads_again_when_another_joined_before_its_delete() {
        let (me, other) = (parent("uid-a", "first"), parent("uid-b", "second"));
        let reads = AtomicUsize::new(0);
        let (alone, joined) = (shared("5", &[&me]), shared("6", &[&me, &other]));
        let (client, requests) = fake_api::client(move |method, _, _| match method {
            "GET" if reads.fetch_add(1, Ordering::SeqCst) == 0 => answer(&alone),
            "GET" => answer(&joined),
            // The precondition on version 5 no longer holds.
            "DELETE" => status(409, "Conflict", "the object has been modified"),
            "PATCH" => answer(&joined),
            _ => status(405, "MethodNotAllowed", "unexpected"),
        });
        assert_eq!(release_of(client, &me, false).await, Released::Left);
        let all = requests.all();
        let methods: Vec<&str> = all.iter().map(|s| s.method.as_str()).collect();
        assert_eq!(methods, ["GET", "DELETE", "GET", "PATCH"]);
        let delete: serde_json::Value = serde_json::from_str(&all[1].body).unwrap();
        assert_eq!(delete["preconditions"]["resourceVersion"], "5");
        assert_eq!(delete["preconditions"]["uid"], "c-1");
        // Only this parent's keys go.
        let patch: serde_json::Value = serde_json::from_str(&all[3].body).unwrap();
        let labels = patch["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels.len(), 1, "{patch}");
        assert!(labels.contains_key("kubeplex.dev/parent-uid.uid-a"));
    }

    #[tokio::test]
    async fn the_last_parent_deletes_or_if_spared_unlinks_under_the_version_it_read() {
        let me = parent("uid-a", "first");
        let alone = shared("5", &[&me]);
        let gone = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "status": "Success" });
        let (client, requests) = fake_api::client(move |method, _, _| match method {
            "GET" | "PATCH" => answer(&alone),
            "DELETE" => (200, gone.clone()),
            _ => status(405, "MethodNotAllowed", "unexpected"),
        });
        let deleted = release_of(client.clone(), &me, false).await;
        assert_eq!(deleted, Released::Deleted);
        assert_eq!(release_of(client, &me, true).await, Released::Unlinked);
        let all = requests.all();
        let unlink: serde_json::Value = serde_json::from_str(&all[3].body).unwrap();
        assert_eq!(all[3].method, "PATCH");
        assert_eq!(unlink["metadata"]["resourceVersion"], "5");
        assert!(unlink["metadata"]["labels"][crate::core::SHARED_LABEL].is_null());
    }

    #[tokio::test]
    async fn a_child_replaced_forged_or_no_longer_naming_the_parent_is_not_there_and_not_written() {
        let (me, other) = (parent("uid-a", "first"), parent("uid-b", "second"));
        let mut replaced = shared("7", &[&me]);
        replaced.uid = Some("c-2".into());
        let others = shared("8", &[&other]);
        let mut forged = shared("9", &[&me]);
        forged.managed_fields = None;
        for found in [replaced, others, forged] {
            let (client, requests) = fake_api::client(move |method, _, _| match method {
                "GET" => answer(&found),
                _ => status(405, "MethodNotAllowed", "unexpected"),
            });
            assert_eq!(release_of(client, &me, false).await, Released::NotThere);
            assert_eq!(requests.lines().len(), 1, "{:?}", requests.lines());
        }
    }
}
