//! Removing every child of a deleted parent in one cluster, and deleting one child. A child counts as
//! removed once it is gone, not once its delete was accepted: one that carries a finalizer (a Namespace
//! whose content is still being deleted, a PersistentVolumeClaim in use, anything another controller
//! guards) stays, `Terminating`, and the parent's deletion waits for it. A child whose delete policy says
//! orphan is unlinked and left in place instead, and the parent does not wait for it.

use std::sync::Arc;

use kube::Client;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, PartialObjectMeta,
    Preconditions,
};

use super::apply_order::sort_for_delete;
use super::changes::{ChildChange, ChildChanges};
use super::conflicts::Conflicts;
use super::deletion_lists::DeletionLists;
use super::requests::{api, kind_of, place};
use super::sharing::{self, Released};
use super::tally::Tally;
use super::unlink::unlink;
use crate::core::{ClusterOutcome, DeletePolicy, PARENT_UID_LABEL, ParentRef};
use crate::core::{is_shared, sharing_label};
use crate::metrics::Metrics;

/// Deletes every child of the parent in one cluster, found by listing (not the cache, which may lag), the
/// kinds in the reverse of the apply order: `Deleted` once none is left, `Deleting` naming those still going
/// (and why), or why they could not be deleted. Those whose delete policy says orphan are unlinked
/// instead, and added to `changes`. An object with the parent's UID label whose annotations do not name
/// the parent is not its child: reported to `conflicts` (with the metrics and the controller's name, in
/// `counted`), left alone. Runs in a `prune` span (the cluster, how many children it deleted).
pub(in crate::engine) async fn remove_children(
    context: &str,
    client: Client,
    places: &[ChildPlace],
    parent: &ParentRef,
    counted: (&Metrics, &str, &Conflicts),
    changes: &ChildChanges,
    lists: &DeletionLists,
) -> ClusterOutcome {
    let span = tracing::info_span!("prune", cluster = context, children = tracing::field::Empty);
    let removal = remove_all(
        context,
        client,
        places,
        (parent, lists),
        span.clone(),
        counted,
        changes,
    );
    tracing::Instrument::instrument(removal, span).await
}

async fn remove_all(
    context: &str,
    client: Client,
    places: &[ChildPlace],
    (parent, lists): (&ParentRef, &DeletionLists),
    span: tracing::Span,
    counted: (&Metrics, &str, &Conflicts),
    changes: &ChildChanges,
) -> ClusterOutcome {
    let mut places: Vec<&ChildPlace> = places.iter().collect();
    sort_for_delete(&mut places, |place| &place.resource);
    let mut tally = Tally::default();
    // Kinds one after the other, in the reverse of the apply order; the namespaces of one kind at once.
    let mut rest = places.as_slice();
    let stopped = loop {
        let Some(first) = rest.first() else {
            break None;
        };
        let same = rest
            .iter()
            .take_while(|p| p.resource == first.resource)
            .count();
        let (kind, after) = rest.split_at(same);
        rest = after;
        let removals = kind.iter().map(|place| {
            let client = client.clone();
            remove_place(context, client, place, (parent, lists), counted, changes)
        });
        let mut stop = None;
        for removed in futures::future::join_all(removals).await {
            match removed {
                Ok(removed) => tally.absorb(removed),
                Err(outcome) => stop = stop.or(Some(outcome)),
            }
        }
        if stop.is_some() {
            break stop;
        }
    };
    span.record("children", tally.done);
    stopped.unwrap_or_else(|| tally.removed())
}

/// Removes the parent's children of one kind in one namespace: what became of them, or the outcome that
/// stops the cluster's removal (it cannot be reached, or this replica's fence refused).
async fn remove_place(
    context: &str,
    client: Client,
    place: &ChildPlace,
    (parent, lists): (&ParentRef, &DeletionLists),
    (metrics, controller, conflicts): (&Metrics, &str, &Conflicts),
    changes: &ChildChanges,
) -> Result<Tally, ClusterOutcome> {
    let own = ListParams::default().labels(&format!("{PARENT_UID_LABEL}={}", parent.uid));
    let sharing = ListParams::default().labels(&sharing_label(&parent.uid));
    // Only what names this parent in full is its child; anything else with its UID label is reported.
    let of_parent = |resource: &ApiResource, child: &PartialObjectMeta<DynamicObject>| {
        if is_shared(&child.metadata) {
            return parent.shares(&child.metadata);
        }
        let ours = parent.is_parent_of(&child.metadata);
        if !ours {
            let why =
                "it carries the deleted parent's UID label, but its annotations do not name it";
            conflicts.report(context, &resource.kind, &child.metadata, why);
        }
        ours
    };
    let mut tally = Tally::default();
    let (resource, namespace) = (&place.resource, &place.namespace);
    let selector = if place.shared { &sharing } else { &own };
    let api = api(client.clone(), resource, namespace.as_deref());
    let listing = format!("listing {}", resource.plural);
    // A parent's own children are found by a list shared with the other parents being deleted;
    // a shared child is recorded under a label key of each parent's own, which one list cannot ask
    // for together.
    let found = if place.shared {
        api.list_metadata(selector)
            .await
            .map(|l| l.items)
            .map_err(Arc::new)
    } else {
        lists.children_of(context, &api, &parent.uid).await
    };
    let children = match found {
        Ok(items) => items.into_iter().filter(|c| of_parent(resource, c)),
        Err(error) => match tally.fail(context, &error, &listing) {
            Some(stop) => return Err(stop),
            None => return Ok(tally),
        },
    };
    // Whether a child may still be there: one already going, or one whose delete the server
    // answered with the object (it keeps it while finalizers or a grace period hold it).
    let mut recheck = false;
    for child in children {
        if is_shared(&child.metadata) {
            let spare = DeletePolicy::of(&child.metadata) == DeletePolicy::Orphan;
            let meta = &child.metadata;
            let name = meta.name.as_deref().unwrap_or_default();
            let place = super::requests::place(&resource.kind, meta.namespace.as_deref(), name);
            let released =
                sharing::release(client.clone(), resource, meta, parent, controller, spare);
            match released.await {
                Ok(Released::Left) => changes.push(context, ChildChange::Released, place),
                Ok(Released::Unlinked) => {
                    changes.push(context, ChildChange::Orphaned, place.clone());
                    tally.orphaned(place);
                }
                Ok(released @ (Released::Deleted | Released::Deleting)) => {
                    tally.done += 1;
                    recheck |= released == Released::Deleting;
                    let kind = kind_of(resource);
                    metrics.children_pruned(controller, context, &kind, 1);
                }
                Ok(Released::NotThere) => {}
                Err(error) => {
                    let what = format!("letting go of {place}");
                    if let Some(stop) = tally.fail(context, &error, &what) {
                        return Err(stop);
                    }
                }
            }
            continue;
        }
        if DeletePolicy::of(&child.metadata) == DeletePolicy::Orphan {
            let orphaned = orphan(context, &client, resource, &child.metadata, controller);
            let orphaned = orphaned.await;
            match orphaned {
                Ok(Some(place)) => {
                    changes.push(context, ChildChange::Orphaned, place.clone());
                    tally.orphaned(place);
                }
                Ok(None) => {}
                Err((error, what)) => {
                    if let Some(stop) = tally.fail(context, &error, &what) {
                        return Err(stop);
                    }
                }
            }
            continue;
        }
        if child.metadata.deletion_timestamp.is_some() {
            recheck = true;
            continue;
        }
        let name = child.metadata.name.clone().unwrap_or_default();
        tracing::info!(cluster = %context, kind = %resource.kind, %name, "deleting a child of a deleted parent");
        match try_delete(client.clone(), resource, &child.metadata).await {
            Ok(deleted) => {
                let counts = deleted != Deleted::NotThere;
                tally.done += u32::from(counts);
                recheck |= deleted == Deleted::Accepted;
                let kind = kind_of(resource);
                metrics.children_pruned(controller, context, &kind, u64::from(counts));
            }
            Err(error) => {
                let what = format!("deleting {} {name}", resource.kind);
                if let Some(stop) = tally.fail(context, &error, &what) {
                    return Err(stop);
                }
            }
        }
    }
    if !recheck {
        return Ok(tally);
    }
    match api.list_metadata(selector).await {
        Ok(left) => {
            for child in left.items.into_iter().filter(|c| of_parent(resource, c)) {
                tally.going(going(resource, &child));
            }
        }
        Err(error) => {
            if let Some(stop) = tally.fail(context, &error, &listing) {
                return Err(stop);
            }
        }
    }
    Ok(tally)
}

/// Unlinks a child of a deleted parent that its delete policy orphans: how messages name it
/// (`ConfigMap ns/name`) when done, `None` when it was gone already, or the error and what failed.
async fn orphan(
    context: &str,
    client: &Client,
    resource: &ApiResource,
    child: &ObjectMeta,
    controller: &str,
) -> Result<Option<String>, (kube::Error, String)> {
    let name = child.name.as_deref().unwrap_or_default();
    tracing::info!(cluster = %context, kind = %resource.kind, %name, "orphaning a child of a deleted parent: unlinked, left in place");
    match unlink(client.clone(), resource, child, controller).await {
        Ok(true) => Ok(Some(place(
            &resource.kind,
            child.namespace.as_deref(),
            name,
        ))),
        Ok(false) => Ok(None),
        Err(error) => Err((error, format!("unlinking {} {name}", resource.kind))),
    }
}

/// A child still there after its delete, and why: `ConfigMap kids/web (Terminating; finalizers:
/// example.com/hold)`.
fn going(resource: &ApiResource, child: &PartialObjectMeta<DynamicObject>) -> String {
    let meta = &child.metadata;
    let place = place(
        &resource.kind,
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    );
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    let why = match (&meta.deletion_timestamp, finalizers) {
        (None, _) => "not deleted yet".to_owned(),
        (Some(_), []) => "Terminating".to_owned(),
        (Some(_), finalizers) => format!("Terminating; finalizers: {}", finalizers.join(", ")),
    };
    format!("{place} ({why})")
}

/// Where a deleted parent's children of one kind may be in a cluster: the kind, its namespace (`None`:
/// cluster-scoped, or every namespace), and whether they are shared (found by the parent's own key then).
pub(in crate::engine) struct ChildPlace {
    pub(in crate::engine) resource: ApiResource,
    pub(in crate::engine) namespace: Option<String>,
    pub(in crate::engine) shared: bool,
}

impl ChildPlace {
    /// Children of `resource` in `namespace`, not shared.
    #[cfg(test)]
    pub(in crate::engine) fn of(resource: ApiResource, namespace: Option<&str>) -> Self {
        Self {
            resource,
            namespace: namespace.map(str::to_owned),
            shared: false,
        }
    }
}

/// What [`remove`] did with a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::engine) enum Removed {
    /// Deleted (or gone already).
    Deleted,
    /// Unlinked and left in place: its delete policy says orphan.
    Orphaned,
}

/// Removes a child whose parent is gone (or whose cluster leaves the fleet): deletes it, only if it is
/// still the object we saw (same UID; already gone, or replaced by another object of the same name, counts
/// as done), or, when its delete policy says orphan, unlinks it and leaves it in place.
pub(in crate::engine) async fn remove(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
    controller: &str,
) -> Result<Removed, kube::Error> {
    if DeletePolicy::of(child) == DeletePolicy::Orphan {
        unlink(client, resource, child, controller).await?;
        return Ok(Removed::Orphaned);
    }
    try_delete(client, resource, child).await?;
    Ok(Removed::Deleted)
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// The server deleted the child.
    Gone,
    /// The server accepted the delete and answered with the object: it may still be there (finalizers, a
    /// grace period), which only a read tells.
    Accepted,
    /// It was gone already, or replaced by another object of the same name.
    NotThere,
}

/// Deletes a child, only if it is still the object we saw (same UID); what the delete did.
pub(crate) async fn try_delete(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
) -> Result<Deleted, kube::Error> {
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
        // A `Status` says the object was deleted; the object itself, that it may be kept a while.
        Ok(answer) if answer.is_right() => Ok(Deleted::Gone),
        Ok(_) => Ok(Deleted::Accepted),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            Ok(Deleted::NotThere)
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
