//! Whose a child's name is before it is applied. The cache knows this controller's children; a name it does
//! not know is applied under a precondition (only a missing object, or only the object this process just
//! applied for the parent) and looked up only when the server refuses it: a new child costs one request,
//! and a foreign object is never adopted. An object is this parent's only when it names the parent in full
//! (its UID label and its annotation) and this controller is among its field managers: labels alone, which
//! anyone who can create the object can write, never make it a child.

use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams};

use super::parentage::Parentage;
use super::sharing;
use crate::controller::DesiredChild;
use crate::core::{CONTROLLER_LABEL, PARENT_ANNOTATION, PARENT_UID_LABEL, ParentRef, written_by};
use crate::core::{
    SHARED_DIGEST_ANNOTATION, is_shared, is_shared_object, other_sharers, sharing_parents,
    was_shared,
};
use crate::engine::engine::ChildWatch;

/// A resourceVersion no object has: etcd counts revisions from 1 and every write makes a new one, so a
/// stored object's is at least 2. As a precondition of an apply it lets the apply create a missing object
/// and refuses (409 Conflict) to touch one that exists.
const NO_OBJECT_HAS: &str = "1";

/// Whose a child is, as far as this parent is concerned.
pub(crate) enum Claim {
    /// Absent, or already this parent's (as it is now): apply it. `cached` when it was read from the
    /// cache (not from the server).
    Ours {
        before: Option<Box<ObjectMeta>>,
        cached: bool,
    },
    /// Someone else's (described): leave it alone. With the object when it names this parent, or carries
    /// its UID, without being its child: a conflict, reported as one.
    Taken(String, Option<Box<ObjectMeta>>),
}

impl Claim {
    /// A child just created: nothing was there before.
    pub(crate) fn new_child() -> Self {
        Self::Ours {
            before: None,
            cached: false,
        }
    }
}

/// What the cache says of the child's name: this parent's (or one it may take back) or someone else's.
/// A name it does not have is to be applied under a precondition (an [`Attempt`]), and looked up only if
/// the server refuses it.
pub(crate) fn claim(
    watches: &[&ChildWatch],
    child: &DesiredChild,
    link: &Parentage<'_>,
) -> Result<Claim, Attempt> {
    let of_kind = || watches.iter().filter(|w| w.resource == child.resource);
    let namespace = child.namespace.as_deref();
    if let Some(cached) = of_kind().find_map(|w| w.cache.get(namespace, &child.name)) {
        return Ok(judge(cached, child, link, true));
    }
    let parent = link.parent.uid.as_str();
    let applied = of_kind().find_map(|w| w.answered.applied_for(namespace, &child.name, parent));
    Err(match applied {
        // Applied for this parent a moment ago, not delivered by the watch yet: still that object.
        Some(applied) => Attempt {
            precondition: Precondition::Same(applied.uid.clone()),
            before: Some(Box::new(ObjectMeta {
                name: Some(child.name.clone()),
                namespace: child.namespace.clone(),
                uid: Some(applied.uid),
                resource_version: applied.version,
                ..ObjectMeta::default()
            })),
        },
        None => Attempt {
            precondition: Precondition::Absent,
            before: None,
        },
    })
}

/// An apply of a child the cache does not have, that the server lets through only as its precondition
/// says.
pub(crate) struct Attempt {
    precondition: Precondition,
    /// The child as it was, when it was this parent's.
    before: Option<Box<ObjectMeta>>,
}

/// What an [`Attempt`] lets through.
enum Precondition {
    /// Only a missing object: the apply creates it.
    Absent,
    /// Only the object of this UID: the child this process applied for the parent.
    Same(String),
}

impl Attempt {
    /// Applies `child` if its precondition holds: `Ok(None)` when the server refused it (the name is
    /// taken, or the object is gone or another); [`look_up`] then says whose the name is.
    /// A shared child is created naming `parent` instead (see [`sharing::create`]).
    pub(crate) async fn apply(
        &self,
        api: &Api<DynamicObject>,
        params: &PatchParams,
        child: &mut DesiredChild,
        parent: &ParentRef,
    ) -> kube::Result<Option<DynamicObject>> {
        if matches!(self.precondition, Precondition::Absent) && is_shared_object(&child.object) {
            let manager = params.field_manager.as_deref().unwrap_or_default();
            return sharing::create(api, manager, parent, &child.object).await;
        }
        let (field, value) = match &self.precondition {
            Precondition::Absent => ("resourceVersion", NO_OBJECT_HAS),
            Precondition::Same(uid) => ("uid", uid.as_str()),
        };
        child.object["metadata"][field] = value.into();
        let applied = api
            .patch(&child.name, params, &Patch::Apply(&child.object))
            .await;
        if let Some(metadata) = child.object["metadata"].as_object_mut() {
            metadata.remove(field);
        }
        // 409: the name is taken, or the object of the UID is gone; 422: another object has the name (a
        // UID cannot change), or the child is invalid, which the apply after the look-up reports.
        let refused = match &self.precondition {
            Precondition::Absent => [409, 409],
            Precondition::Same(_) => [409, 422],
        };
        match applied {
            Ok(applied) => Ok(Some(applied)),
            Err(kube::Error::Api(status)) if refused.contains(&status.code) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The claim of a child whose apply went through.
    pub(crate) fn ours(self) -> Claim {
        Claim::Ours {
            before: self.before,
            cached: false,
        }
    }
}

/// Whose the object that has the child's name is, read from the server.
pub(crate) async fn look_up(
    api: &Api<DynamicObject>,
    child: &DesiredChild,
    link: &Parentage<'_>,
) -> kube::Result<Claim> {
    Ok(match api.get_metadata_opt(&child.name).await? {
        Some(found) => judge(found.metadata, child, link, false),
        // Gone since: the apply creates it.
        None => Claim::new_child(),
    })
}

/// Whether `meta` may be applied for this parent as `child`: written by this controller (its field manager)
/// and one of this parent's children, or one unlinked from this parent, or from its kind and place (kept or
/// orphaned before), which it takes back; for a shared child, see [`judge_shared`].
fn judge(meta: ObjectMeta, child: &DesiredChild, link: &Parentage<'_>, cached: bool) -> Claim {
    if is_shared_object(&child.object)
        && let Some(claim) = judge_shared(&meta, child, link, cached)
    {
        return claim;
    }
    let parent = link.parent;
    let linked = parent.is_parent_of(&meta) || parent.was_unlinked_from(&meta, link.parent_kind);
    if linked && written_by(&meta, link.controller) {
        return Claim::Ours {
            before: Some(Box::new(meta)),
            cached,
        };
    }
    if linked {
        let owner = format!(
            "someone else (it names this parent, but {} is not among its field managers)",
            link.controller
        );
        return Claim::Taken(owner, Some(Box::new(meta)));
    }
    let uid = meta.labels.as_ref().and_then(|l| l.get(PARENT_UID_LABEL));
    let conflict = uid.is_some_and(|uid| *uid == parent.uid);
    let owner = match ParentRef::of(&meta) {
        Some(other) if uid.is_some_and(|uid| *uid == parent.uid) => format!(
            "no kubeplex parent (its UID label is this parent's, its annotation names {})",
            other.place()
        ),
        Some(other) => format!("another parent ({})", other.place()),
        None if uid.is_some_and(|uid| *uid == parent.uid) => {
            "no kubeplex parent (its UID label is this parent's, its annotations name none)".into()
        }
        None if is_shared(&meta) => {
            let parents = sharing_parents(&meta);
            let parents: Vec<String> = parents.iter().map(ParentRef::place).collect();
            format!("the parents that share it ({})", parents.join(", "))
        }
        None => match meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(PARENT_ANNOTATION))
        {
            Some(was) => format!("no kubeplex parent (another parent, {was}, left it in place)"),
            None => "no kubeplex parent (it was created by someone else)".into(),
        },
    };
    Claim::Taken(owner, conflict.then(|| Box::new(meta)))
}

/// The claim on `meta` of a parent that declares `child` shared: this controller's shared child (or one its
/// last parent left in place, which any parent of that kind takes back) is this parent's to apply
/// and join, unless the parents already sharing it applied other content (a conflict, or each apply would
/// undo the other's). `None`: judged as any child (a child of this parent from before its kind was
/// shared is taken over; anything else is someone else's).
fn judge_shared(
    meta: &ObjectMeta,
    child: &DesiredChild,
    link: &Parentage<'_>,
    cached: bool,
) -> Option<Claim> {
    let labels = meta.labels.as_ref();
    let ours = is_shared(meta)
        && labels
            .and_then(|l| l.get(CONTROLLER_LABEL))
            .map(String::as_str)
            == Some(link.controller);
    let linked = ours || was_shared(meta, link.parent_kind);
    if !linked || !written_by(meta, link.controller) {
        return None;
    }
    let digest = |annotations: Option<&serde_json::Value>| {
        annotations.and_then(|a| a[SHARED_DIGEST_ANNOTATION].as_str().map(str::to_owned))
    };
    let wanted = digest(child.object["metadata"].get("annotations"));
    let applied = (meta.annotations.as_ref()).and_then(|a| a.get(SHARED_DIGEST_ANNOTATION));
    let others = other_sharers(meta, link.parent);
    if let Some(others) = others.filter(|_| ours && applied.is_some() && applied != wanted.as_ref())
    {
        let owner = format!("the parents that share it, which declare it otherwise ({others})");
        return Some(Claim::Taken(owner, None));
    }
    Some(Claim::Ours {
        before: Some(Box::new(meta.clone())),
        cached,
    })
}

#[cfg(test)]
mod tests {
    //! The preconditions an [`Attempt`] applies under, against a real API server: a free name lets the
    //! create through and a taken one is refused (409); an apply pinned to a UID goes through to that object,
    //! and is refused when it is gone (409) or another object has the name (422).

    use super::*;
    use crate::testing::real_cluster::{self, CLUSTER};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PatchParams, PostParams};

    /// A ConfigMap child named `name` in `namespace`.
    fn desired(namespace: &str, name: &str) -> DesiredChild {
        DesiredChild {
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
            object: serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": name, "namespace": namespace },
                "data": { "key": "value" },
            }),
        }
    }

    fn attempt(precondition: Precondition) -> Attempt {
        Attempt {
            precondition,
            before: None,
        }
    }

    #[tokio::test]
    async fn a_real_server_lets_an_attempt_through_only_as_its_precondition_says() {
        let env = real_cluster::env().await;
        let namespace = env.create_namespace(&[CLUSTER], "claim").await.unwrap();
        let client = env.client(CLUSTER).await.unwrap();
        let resource = ApiResource::erase::<ConfigMap>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        let params = PatchParams::apply("claim-test").force();
        let owner = ParentRef {
            context: "control".into(),
            namespace: Some("crds".into()),
            name: "crd-a".into(),
            uid: "uid-1".into(),
        };
        let mut child = desired(&namespace, "web");

        // A free name: created by the one apply.
        let created = attempt(Precondition::Absent)
            .apply(&api, &params, &mut child, &owner)
            .await
            .unwrap()
            .expect("a free name lets the create through");
        let uid = created.metadata.uid.clone().unwrap();
        // The precondition is not left in the child for the next apply.
        assert!(child.object["metadata"].get("resourceVersion").is_none());
        // Taken now: refused, nothing written.
        let refused = attempt(Precondition::Absent)
            .apply(&api, &params, &mut child, &owner)
            .await
            .unwrap();
        assert!(refused.is_none(), "{refused:?}");

        // Pinned to its UID: applied to that object.
        let same = attempt(Precondition::Same(uid.clone()))
            .apply(&api, &params, &mut child, &owner)
            .await
            .unwrap()
            .expect("the object of the UID lets the apply through");
        assert_eq!(same.metadata.uid.as_deref(), Some(uid.as_str()));
        assert!(child.object["metadata"].get("uid").is_none());

        // Gone: refused (409), and nothing created in its place.
        api.delete("web", &DeleteParams::default()).await.unwrap();
        let gone = attempt(Precondition::Same(uid.clone()))
            .apply(&api, &params, &mut child, &owner)
            .await
            .unwrap();
        assert!(gone.is_none(), "{gone:?}");
        assert!(api.get_opt("web").await.unwrap().is_none());

        // Another object with the name: refused (422), and that object left as it was.
        let configmaps: Api<ConfigMap> = Api::namespaced(client, &namespace);
        let stranger = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let stranger = configmaps
            .create(&PostParams::default(), &stranger)
            .await
            .unwrap();
        let taken = attempt(Precondition::Same(uid))
            .apply(&api, &params, &mut child, &owner)
            .await
            .unwrap();
        assert!(taken.is_none(), "{taken:?}");
        let now = configmaps.get("web").await.unwrap();
        assert_eq!(now.metadata.uid, stranger.metadata.uid);
        assert_eq!(
            now.metadata.resource_version,
            stranger.metadata.resource_version
        );
        assert_eq!(now.data, None);
    }
}
