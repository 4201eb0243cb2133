//! Children in one cluster: applying the desired ones, pruning the rest, removing them all when the parent
//! goes. Nothing here knows the controller's types; the engine calls it once per child context.

use std::sync::atomic::{AtomicUsize, Ordering};

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    Preconditions,
};

use super::child_changes::{ChildChange, ChildChanges, change_of};
use super::engine::ChildWatch;
use crate::controller::DesiredChild;
use crate::core::chain;
use crate::core::{ClusterState, ContextOutcome};
use crate::core::{PARENT_UID_LABEL, ParentRef};
use crate::core::{is_transport, transport};
use crate::metrics::Metrics;

/// What linking needs to know of the parent and its controller.
pub(super) struct Parentage<'a> {
    pub(crate) parent: &'a ParentRef,
    pub(crate) controller: &'a str,
    pub(crate) parent_kind: &'a str,
    /// Where applies and prunes are counted.
    pub(crate) metrics: &'a Metrics,
}

fn api(client: Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, resource),
        None => Api::all_with(client, resource),
    }
}

/// An outcome for a failed request: unreachable when the server could not be reached, fenced when this
/// replica's own fence refused the write, else failed. Its message says what failed and why; the context
/// it is kept under names the cluster.
pub(super) fn failure(error: &kube::Error, what: &str) -> ContextOutcome {
    let fenced = crate::core::fenced(error);
    let (state, why) = if let Some(refusal) = fenced {
        (ClusterState::Failed, refusal.to_owned())
    } else if is_transport(error) {
        (ClusterState::Unreachable, transport(error))
    } else {
        (ClusterState::Failed, chain(error))
    };
    ContextOutcome {
        state,
        children: 0,
        message: Some(format!("{what}: {why}")),
        fenced,
    }
}

/// Whose a child is, as far as this parent is concerned.
enum Claim {
    /// Absent, or already this parent's (as it is now): apply it.
    Ours(Option<Box<ObjectMeta>>),
    /// Someone else's (described): leave it alone.
    Taken(String),
}

/// Applies the desired children of one context (server-side apply, the controller as field manager) and
/// deletes the parent's children there that are no longer desired. `watches` are this context's child
/// caches. A child whose name is taken by an object that is not this parent's is left alone and reported
/// as a conflict. The children created, changed or deleted are added to `changes`.
///
/// Runs in an `apply` span (the context, how many children it wants there); the pruning in a `prune` span
/// within it (how many it deletes).
pub(super) async fn sync_context(
    context: &str,
    client: Client,
    desired: Vec<DesiredChild>,
    watches: &[&ChildWatch],
    link: &Parentage<'_>,
    changes: &ChildChanges,
) -> ContextOutcome {
    let span = tracing::info_span!("apply", context, children = desired.len());
    // A sync cut off by the per-context cap (a hung cluster) counts its children not yet applied as errors.
    let unfinished = Unfinished {
        link,
        context,
        kinds: desired.iter().map(|d| kind_of(&d.resource)).collect(),
        done: AtomicUsize::new(0),
    };
    let sync = sync(
        context,
        client,
        desired,
        watches,
        link,
        changes,
        &unfinished,
    );
    tracing::Instrument::instrument(sync, span).await
}

/// Counts, when dropped, the children of a sync that were never counted as applied, conflicting or failed.
struct Unfinished<'a> {
    link: &'a Parentage<'a>,
    context: &'a str,
    kinds: Vec<String>,
    done: AtomicUsize,
}

impl Unfinished<'_> {
    /// One more child counted; `result` is success, error or conflict.
    fn count(&self, result: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed);
        if let Some(kind) = self.kinds.get(done) {
            let (link, context) = (self.link, self.context);
            link.metrics
                .children_applied(link.controller, context, kind, result, 1);
        }
    }
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        while self.done.load(Ordering::Relaxed) < self.kinds.len() {
            self.count("error");
        }
    }
}

async fn sync(
    context: &str,
    client: Client,
    mut desired: Vec<DesiredChild>,
    watches: &[&ChildWatch],
    link: &Parentage<'_>,
    changes: &ChildChanges,
    unfinished: &Unfinished<'_>,
) -> ContextOutcome {
    let (labels, annotations) = link.parent.stamp(link.controller, link.parent_kind);
    // Forcing is safe: ownership was checked first, and the controller's own earlier writes (or a
    // hand edit of a field it sets) must not block the repair.
    let apply = PatchParams::apply(link.controller).force();
    let mut conflicts = Vec::new();
    for child in &mut desired {
        let api = api(client.clone(), &child.resource, child.namespace.as_deref());
        let place = place(
            &child.resource.kind,
            child.namespace.as_deref(),
            &child.name,
        );
        let before = match claim(&api, watches, &*child, &link.parent.uid).await {
            Ok(Claim::Ours(before)) => before,
            Ok(Claim::Taken(owner)) => {
                unfinished.count("conflict");
                conflicts.push(format!("{place} already exists and belongs to {owner}"));
                continue;
            }
            Err(error) => {
                unfinished.count("error");
                return failure(&error, &format!("reading {place}"));
            }
        };
        // Stamped in place: the child is this sync's own.
        let metadata = &mut child.object["metadata"];
        for (field, stamp) in [("labels", &labels), ("annotations", &annotations)] {
            for (key, value) in stamp {
                metadata[field][key] = serde_json::Value::String(value.clone());
            }
        }
        match api
            .patch(&child.name, &apply, &Patch::Apply(&child.object))
            .await
        {
            Ok(applied) => {
                unfinished.count("success");
                if let Some(change) = change_of(before.as_deref(), &applied.metadata) {
                    changes.push(context, change, place);
                }
            }
            Err(error) => {
                unfinished.count("error");
                return failure(&error, &format!("applying {place}"));
            }
        }
    }
    let stale: Vec<(&ChildWatch, ObjectMeta)> = watches
        .iter()
        .flat_map(|watch| {
            watch
                .cache
                .children_of(&link.parent.uid)
                .into_iter()
                .filter(|meta| !desired.iter().any(|d| is_desired(d, watch, meta)))
                .map(move |meta| (*watch, meta))
        })
        .collect();
    if !stale.is_empty() {
        let span = tracing::info_span!("prune", context, children = stale.len());
        let pruned = prune(context, &client, stale, changes, link);
        let pruned = tracing::Instrument::instrument(pruned, span);
        if let Err(outcome) = pruned.await {
            return outcome;
        }
    }
    if !conflicts.is_empty() {
        return ContextOutcome {
            fenced: None,
            state: ClusterState::Conflict,
            children: (desired.len() - conflicts.len()) as u32,
            message: Some(conflicts.join("; ")),
        };
    }
    ContextOutcome {
        fenced: None,
        state: if desired.is_empty() {
            ClusterState::NotTargeted
        } else {
            ClusterState::Ready
        },
        children: desired.len() as u32,
        message: None,
    }
}

/// `Kind.group/version`, as the metrics label kinds.
fn kind_of(resource: &ApiResource) -> String {
    crate::core::format_kind(&resource.kind, &resource.group, &resource.version)
}

/// How a child is named in messages: `Deployment namespace-a/web`.
fn place(kind: &str, namespace: Option<&str>, name: &str) -> String {
    let namespace = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    format!("{kind} {namespace}{name}")
}

/// Deletes the children no longer desired; the failure's outcome if one fails.
async fn prune(
    context: &str,
    client: &Client,
    stale: Vec<(&ChildWatch, ObjectMeta)>,
    changes: &ChildChanges,
    link: &Parentage<'_>,
) -> Result<(), ContextOutcome> {
    for (watch, stale) in stale {
        let name = stale.name.clone().unwrap_or_default();
        tracing::info!(%context, kind = %watch.resource.kind, %name, "deleting a child no longer desired");
        match try_delete(client.clone(), &watch.resource, &stale).await {
            Ok(true) => {
                let kind = kind_of(&watch.resource);
                link.metrics
                    .children_pruned(link.controller, context, &kind, 1);
                let place = place(&watch.resource.kind, stale.namespace.as_deref(), &name);
                changes.push(context, ChildChange::Pruned, place);
            }
            Ok(false) => {}
            Err(error) => {
                let what = format!("deleting {} {name}", watch.resource.kind);
                return Err(failure(&error, &what));
            }
        }
    }
    Ok(())
}

fn is_desired(desired: &DesiredChild, watch: &ChildWatch, meta: &ObjectMeta) -> bool {
    desired.resource == watch.resource
        && desired.namespace == meta.namespace
        && Some(&desired.name) == meta.name.as_ref()
}

/// Whether the child may be applied: the cache knows this controller's children; anything else with the
/// name is looked up once (only a child not yet cached, so normally only at its creation).
async fn claim(
    api: &Api<DynamicObject>,
    watches: &[&ChildWatch],
    child: &DesiredChild,
    parent_uid: &str,
) -> kube::Result<Claim> {
    let cached = watches
        .iter()
        .filter(|w| w.resource == child.resource)
        .find_map(|w| w.cache.get(child.namespace.as_deref(), &child.name));
    let existing = match cached {
        Some(meta) => Some(meta),
        None => api.get_metadata_opt(&child.name).await?.map(|m| m.metadata),
    };
    Ok(match existing {
        None => Claim::Ours(None),
        Some(meta) if is_child_of(&meta, parent_uid) => Claim::Ours(Some(Box::new(meta))),
        Some(meta) => Claim::Taken(match ParentRef::of(&meta) {
            Some(other) => format!(
                "another parent ({}/{}{})",
                other.context,
                other
                    .namespace
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default(),
                other.name
            ),
            None => "no kubeplex parent (it was created by someone else)".into(),
        }),
    })
}

/// Deletes every child of the parent in one context, found by listing (not the cache, which may lag):
/// `Ready` with no children left, or why not. Runs in a `prune` span (the context, how many children it
/// deleted).
pub(super) async fn remove_children(
    context: &str,
    client: Client,
    targets: &[(ApiResource, Option<String>)],
    parent_uid: &str,
    counted: (&Metrics, &str),
) -> ContextOutcome {
    let span = tracing::info_span!("prune", context, children = tracing::field::Empty);
    let removal = remove_all(context, client, targets, parent_uid, span.clone(), counted);
    tracing::Instrument::instrument(removal, span).await
}

async fn remove_all(
    context: &str,
    client: Client,
    targets: &[(ApiResource, Option<String>)],
    parent_uid: &str,
    span: tracing::Span,
    (metrics, controller): (&Metrics, &str),
) -> ContextOutcome {
    let selector = ListParams::default().labels(&format!("{PARENT_UID_LABEL}={parent_uid}"));
    let mut deleted = 0_usize;
    for (resource, namespace) in targets {
        let children = match api(client.clone(), resource, namespace.as_deref())
            .list_metadata(&selector)
            .await
        {
            Ok(list) => list.items,
            Err(error) => return failure(&error, &format!("listing {}", resource.plural)),
        };
        for child in children {
            let name = child.metadata.name.clone().unwrap_or_default();
            tracing::info!(%context, kind = %resource.kind, %name, "deleting a child of a deleted parent");
            match try_delete(client.clone(), resource, &child.metadata).await {
                Ok(gone) => {
                    deleted += usize::from(gone);
                    let kind = kind_of(resource);
                    metrics.children_pruned(controller, context, &kind, u64::from(gone));
                }
                Err(error) => {
                    span.record("children", deleted);
                    let what = format!("deleting {} {name}", resource.kind);
                    return failure(&error, &what);
                }
            }
        }
    }
    span.record("children", deleted);
    ContextOutcome {
        fenced: None,
        state: ClusterState::Ready,
        children: 0,
        message: None,
    }
}

/// Deletes a child, only if it is still the object we saw (same UID); already gone, or replaced by another
/// object of the same name, counts as done.
pub(super) async fn delete(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
) -> Result<(), kube::Error> {
    try_delete(client, resource, child).await.map(|_| ())
}

/// As [`delete`]; whether this call deleted it (not: it was gone or replaced already).
async fn try_delete(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: child.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    let api = api(client, resource, child.namespace.as_deref());
    match api
        .delete(child.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Whether `meta` is a child of the parent with this UID.
pub(crate) fn is_child_of(meta: &ObjectMeta, parent_uid: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(PARENT_UID_LABEL))
        .is_some_and(|uid| uid == parent_uid)
}

#[cfg(test)]
mod tests;
