//! Whose a child's name is before it is applied. The cache knows this controller's children; a name it does
//! not know is created with an apply that only a missing object lets through, and looked up only when the
//! name turns out to be taken: a new child costs one request, and a foreign object is never adopted.

use kube::api::{Api, DynamicObject, ObjectMeta, Patch, PatchParams};

use super::Parentage;
use crate::controller::DesiredChild;
use crate::core::{PARENT_ANNOTATION, ParentRef};
use crate::engine::engine::ChildWatch;

/// A resourceVersion no object has: etcd counts revisions from 1 and every write makes a new one, so a
/// stored object's is at least 2. As a precondition of an apply it lets the apply create a missing object
/// and refuses (409 Conflict) to touch one that exists.
const NO_OBJECT_HAS: &str = "1";

/// Whose a child is, as far as this parent is concerned.
pub(super) enum Claim {
    /// Absent, or already this parent's (as it is now): apply it. `cached` when it was read from the
    /// cache (not from the server).
    Ours {
        before: Option<Box<ObjectMeta>>,
        cached: bool,
    },
    /// Someone else's (described): leave it alone.
    Taken(String),
}

impl Claim {
    /// A child just created: nothing was there before.
    pub(super) fn new_child() -> Self {
        Self::Ours {
            before: None,
            cached: false,
        }
    }
}

/// What the cache says of the child's name: this parent's (or one it may take back) or someone else's;
/// `None` when it is not cached ([`create`] it then, and [`look_up`] the name only if that finds it taken).
pub(super) fn claim(
    watches: &[&ChildWatch],
    child: &DesiredChild,
    link: &Parentage<'_>,
) -> Option<Claim> {
    let cached = watches
        .iter()
        .filter(|w| w.resource == child.resource)
        .find_map(|w| w.cache.get(child.namespace.as_deref(), &child.name))?;
    Some(judge(cached, link, true))
}

/// Applies `child` only if no object has its name: `Ok(None)` when one has (then [`look_up`] says whose).
pub(super) async fn create(
    api: &Api<DynamicObject>,
    apply: &PatchParams,
    child: &mut DesiredChild,
) -> kube::Result<Option<DynamicObject>> {
    let metadata = &mut child.object["metadata"];
    metadata["resourceVersion"] = NO_OBJECT_HAS.into();
    let created = api
        .patch(&child.name, apply, &Patch::Apply(&child.object))
        .await;
    if let Some(metadata) = child.object["metadata"].as_object_mut() {
        metadata.remove("resourceVersion");
    }
    match created {
        Ok(created) => Ok(Some(created)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(error) => Err(error),
    }
}

/// Whose the object that has the child's name is, read from the server.
pub(super) async fn look_up(
    api: &Api<DynamicObject>,
    child: &DesiredChild,
    link: &Parentage<'_>,
) -> kube::Result<Claim> {
    Ok(match api.get_metadata_opt(&child.name).await? {
        Some(found) => judge(found.metadata, link, false),
        // Gone since: the apply creates it.
        None => Claim::new_child(),
    })
}

/// Whether `meta` may be applied for this parent: one of its children, or one unlinked from this parent,
/// or from its kind and place (kept or orphaned before), which it takes back.
fn judge(meta: ObjectMeta, link: &Parentage<'_>, cached: bool) -> Claim {
    let parent_uid = link.parent.uid.as_str();
    if super::is_child_of(&meta, parent_uid)
        || link.parent.was_unlinked_from(&meta, link.parent_kind)
    {
        return Claim::Ours {
            before: Some(Box::new(meta)),
            cached,
        };
    }
    Claim::Taken(match ParentRef::of(&meta) {
        Some(other) => format!(
            "another parent ({}/{}{})",
            other.context,
            other
                .namespace
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default(),
            other.name
        ),
        None => match meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(PARENT_ANNOTATION))
        {
            Some(was) => format!("no kubeplex parent (another parent, {was}, left it in place)"),
            None => "no kubeplex parent (it was created by someone else)".into(),
        },
    })
}
