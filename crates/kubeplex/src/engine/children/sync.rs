//! Children in one cluster: applying the desired ones in the apply order, pruning the rest, removing them
//! all when the parent goes. Nothing here knows the controller's types; the engine calls it once per child
//! cluster.

use std::sync::atomic::{AtomicUsize, Ordering};

use kube::Client;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams};

use super::applied::digest;
use super::apply_order::{sort_for_apply, sort_for_delete};
use super::changes::{ChildChange, ChildChanges, change_of};
use super::claim::{Claim, claim, look_up};
use super::parentage::Parentage;
use super::removal::{Deleted, try_delete};
use super::requests::{api, kind_of, place};
use super::sharing::{self, Released};
use super::tally::Tally;
use super::unlink::unlink;
use crate::controller::DesiredChild;
use crate::core::ClusterOutcome;
use crate::core::PrunePolicy;
use crate::core::{CONTROLLER_LABEL, PARENT_KIND_ANNOTATION, SHARED_DIGEST_ANNOTATION};
use crate::core::{ParentRef, is_shared, is_shared_object, other_sharers};
use crate::engine::engine::ChildWatch;

/// Applies the desired children of one cluster (server-side apply, the controller as field manager), in
/// the apply order, and deletes the parent's children there that are no longer desired, in its reverse
/// (or unlinks and leaves those whose prune policy keeps them).
/// `watches` are this cluster's child caches. A child whose name is taken by an object that is not this
/// parent's is left alone and reported as a conflict; a child the server refuses is reported with why,
/// and the others are applied all the same. The children created, changed or deleted are added to
/// `changes`. Where the cluster is `live` (answering, every watch listed and current), a child its cache
/// shows unwritten since this controller applied the same object is not applied again; where it is not, every
/// child is applied, so that an unreachable cluster is found and reported rather than assumed unchanged.
///
/// Runs in an `apply` span (the cluster, how many children it wants there); the pruning in a `prune` span
/// within it (how many it deletes).
pub(crate) async fn sync_context(
    context: &str,
    client: Client,
    mut desired: Vec<DesiredChild>,
    watches: &[&ChildWatch],
    live: bool,
    link: &Parentage<'_>,
    changes: &ChildChanges,
) -> ClusterOutcome {
    sort_for_apply(&mut desired, |child| &child.resource);
    let span = tracing::info_span!("apply", cluster = context, children = desired.len());
    // A sync cut off by the per-cluster cap (a hung cluster) counts its children not yet applied as errors.
    let unfinished = Unfinished {
        link,
        context,
        kinds: desired.iter().map(|d| kind_of(&d.resource)).collect(),
        done: AtomicUsize::new(0),
    };
    let sync = sync(client, desired, watches, live, changes, &unfinished);
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

/// [`sync_context`]'s work; `unfinished` carries the cluster and the parent.
async fn sync(
    client: Client,
    mut desired: Vec<DesiredChild>,
    watches: &[&ChildWatch],
    live: bool,
    changes: &ChildChanges,
    unfinished: &Unfinished<'_>,
) -> ClusterOutcome {
    let (context, link) = (unfinished.context, unfinished.link);
    let (labels, annotations) = link.parent.stamp(link.controller, link.parent_kind);
    // Forcing is safe: ownership was checked first, and the controller's own earlier writes (or a
    // hand edit of a field it sets) must not block the repair.
    let apply = PatchParams::apply(link.controller).force();
    let mut tally = Tally::default();
    for child in &mut desired {
        let api = api(client.clone(), &child.resource, child.namespace.as_deref());
        let place = place(
            &child.resource.kind,
            child.namespace.as_deref(),
            &child.name,
        );
        // Stamped in place: the child is this sync's own, or one its parents share.
        let shared = is_shared_object(&child.object);
        if shared {
            stamp_shared(&mut child.object, link);
        } else {
            let metadata = &mut child.object["metadata"];
            for (field, stamp) in [("labels", &labels), ("annotations", &annotations)] {
                for (key, value) in stamp {
                    metadata[field][key] = serde_json::Value::String(value.clone());
                }
            }
        }
        let written = store_of(watches, child);
        let digest = digest(&child.object);
        let (claimed, created) = match claim(watches, child, link) {
            Ok(cached) => (Ok(cached), None),
            Err(attempt) => match attempt.apply(&api, &apply, child, link.parent).await {
                Ok(Some(applied)) => (Ok(attempt.ours()), Some(applied)),
                Ok(None) => (
                    look_up(&api, child, link).await.map_err(|e| (e, "reading")),
                    None,
                ),
                Err(error) => (Err((error, "applying")), None),
            },
        };
        let (before, cached) = match claimed {
            Ok(Claim::Ours { before, cached }) => (before, cached),
            Ok(Claim::Taken(owner, conflict)) => {
                if let Some(object) = conflict {
                    let why = format!("{place} belongs to {owner}");
                    (link.conflicts).report(context, &child.resource.kind, &object, &why);
                }
                unfinished.count("conflict");
                tally.conflict(format!("{place} already exists and belongs to {owner}"));
                continue;
            }
            Err((error, doing)) => {
                unfinished.count("error");
                match tally.fail(context, &error, &format!("{doing} {place}")) {
                    Some(stop) => return stop,
                    None => continue,
                }
            }
        };
        if let (true, Some(written), Some(meta)) = (live && cached, written, before.as_deref()) {
            let (uid, version) = (meta.uid.as_deref(), meta.resource_version.as_deref());
            if written.applied.is_current(uid, version, digest) {
                // Unwritten since this controller applied the same object: applying it again would change
                // nothing (see `applied`), but a parent that shares it may not be recorded on it yet.
                let joined = if shared {
                    sharing::join(&api, link.controller, link.parent, meta).await
                } else {
                    Ok(None)
                };
                match joined {
                    Ok(joined) => {
                        unfinished.count("success");
                        tally.done += 1;
                        let now = joined.as_ref().unwrap_or(meta);
                        if let Some(note) = shared_with(&place, now, link.parent) {
                            tally.shared(note);
                        }
                        if joined.is_some() {
                            changes.push(context, ChildChange::Joined, place);
                        }
                    }
                    Err(error) => {
                        unfinished.count("error");
                        let what = format!("recording this parent on {place}");
                        if let Some(stop) = tally.fail(context, &error, &what) {
                            return stop;
                        }
                    }
                }
                continue;
            }
        }
        let applied = match created {
            Some(created) => Ok(created),
            None => {
                let patch = Patch::Apply(&child.object);
                api.patch(&child.name, &apply, &patch).await
            }
        };
        // What the apply changed, judged before a shared child's join changes it again.
        let change =
            (applied.as_ref().ok()).and_then(|a| change_of(before.as_deref(), &a.metadata));
        // A shared child names this parent once it is applied.
        let applied = match applied {
            Ok(applied) if shared => {
                let joined = sharing::join(&api, link.controller, link.parent, &applied.metadata);
                match joined.await {
                    Ok(Some(meta)) => {
                        if before.is_some() {
                            changes.push(context, ChildChange::Joined, place.clone());
                        }
                        Ok(DynamicObject {
                            metadata: meta,
                            ..applied
                        })
                    }
                    Ok(None) => Ok(applied),
                    Err(error) => Err(error),
                }
            }
            applied => applied,
        };
        match applied {
            Ok(applied) => {
                unfinished.count("success");
                tally.done += 1;
                if shared && let Some(note) = shared_with(&place, &applied.metadata, link.parent) {
                    tally.shared(note);
                }
                if let Some(written) = written {
                    // Unless the watch delivered it first (its answer would outlive the delivery).
                    let namespace = child.namespace.as_deref();
                    let delivered = (written.cache.get(namespace, &child.name))
                        .is_some_and(|cached| cached.uid == applied.metadata.uid);
                    if !delivered {
                        let answer = serde_json::to_value(&applied).unwrap_or_default();
                        let health = written.cache.judge_answer(answer);
                        let answer = (&applied.metadata, link.parent.uid.as_str());
                        (written.answered).record(namespace, &child.name, answer, health);
                    }
                    let meta = &applied.metadata;
                    let cached = || {
                        (watches.iter())
                            .filter(|w| w.resource == child.resource)
                            .flat_map(|w| w.cache.uids())
                            .collect()
                    };
                    let (uid, version) = (meta.uid.as_deref(), meta.resource_version.as_deref());
                    written.applied.record(uid, version, digest, cached);
                }
                if let Some(change) = change {
                    changes.push(context, change, place);
                }
            }
            Err(error) => {
                unfinished.count("error");
                if let Some(stop) = tally.fail(context, &error, &format!("applying {place}")) {
                    return stop;
                }
            }
        }
    }
    let mut stale: Vec<(&ChildWatch, ObjectMeta)> = Vec::new();
    for watch in watches {
        for meta in watch.cache.children_of(&link.parent.uid) {
            if desired.iter().any(|d| is_desired(d, watch, &meta)) {
                continue;
            }
            if link.parent.is_parent_of(&meta) || link.parent.shares(&meta) {
                stale.push((*watch, meta));
                continue;
            }
            // This parent's UID on an object that names another parent (or none): not this parent's to
            // prune. Reported, left alone.
            let name = meta.name.as_deref().unwrap_or_default();
            let place = place(&watch.resource.kind, meta.namespace.as_deref(), name);
            let why =
                "it carries this parent's UID label, but its annotations do not name this parent";
            link.conflicts
                .report(context, &watch.resource.kind, &meta, why);
            tally.conflict(format!("{place} is not this parent's: {why}"));
        }
    }
    if !stale.is_empty() {
        sort_for_delete(&mut stale, |(watch, _)| &watch.resource);
        let span = tracing::info_span!("prune", cluster = context, children = stale.len());
        let pruned = prune(context, &client, stale, changes, link, &mut tally);
        let pruned = tracing::Instrument::instrument(pruned, span);
        if let Some(stop) = pruned.await {
            return stop;
        }
    }
    tally.applied(desired.len())
}

/// Deletes the children no longer desired (unlinks those their prune policy keeps), each failure recorded
/// in `tally`; the outcome to report when one stops the pruning (the cluster cannot be reached).
async fn prune(
    context: &str,
    client: &Client,
    stale: Vec<(&ChildWatch, ObjectMeta)>,
    changes: &ChildChanges,
    link: &Parentage<'_>,
    tally: &mut Tally,
) -> Option<ClusterOutcome> {
    for (watch, stale) in stale {
        let name = stale.name.clone().unwrap_or_default();
        if is_shared(&stale) {
            let spare = PrunePolicy::of(&stale) == PrunePolicy::Keep;
            let released = sharing::release(
                client.clone(),
                &watch.resource,
                &stale,
                link.parent,
                link.controller,
                spare,
            );
            let place = place(&watch.resource.kind, stale.namespace.as_deref(), &name);
            match released.await {
                Ok(Released::NotThere) => {}
                Ok(Released::Left) => changes.push(context, ChildChange::Released, place),
                Ok(Released::Unlinked) => {
                    changes.push(context, ChildChange::Kept, place.clone());
                    tally.kept(place);
                }
                Ok(Released::Deleted | Released::Deleting) => {
                    let kind = kind_of(&watch.resource);
                    link.metrics
                        .children_pruned(link.controller, context, &kind, 1);
                    changes.push(context, ChildChange::Pruned, place);
                }
                Err(error) => {
                    let what = format!("letting go of {place}");
                    if let Some(stop) = tally.fail(context, &error, &what) {
                        return Some(stop);
                    }
                }
            }
            continue;
        }
        if PrunePolicy::of(&stale) == PrunePolicy::Keep {
            tracing::info!(cluster = %context, kind = %watch.resource.kind, %name, "keeping a child no longer desired: unlinked, left in place");
            match unlink(client.clone(), &watch.resource, &stale, link.controller).await {
                Ok(false) => {}
                Ok(true) => {
                    let place = place(&watch.resource.kind, stale.namespace.as_deref(), &name);
                    changes.push(context, ChildChange::Kept, place.clone());
                    tally.kept(place);
                }
                Err(error) => {
                    let what = format!("unlinking {} {name}", watch.resource.kind);
                    if let Some(stop) = tally.fail(context, &error, &what) {
                        return Some(stop);
                    }
                }
            }
            continue;
        }
        tracing::info!(cluster = %context, kind = %watch.resource.kind, %name, "deleting a child no longer desired");
        match try_delete(client.clone(), &watch.resource, &stale).await {
            Ok(Deleted::NotThere) => {}
            Ok(Deleted::Gone | Deleted::Accepted) => {
                let kind = kind_of(&watch.resource);
                link.metrics
                    .children_pruned(link.controller, context, &kind, 1);
                let place = place(&watch.resource.kind, stale.namespace.as_deref(), &name);
                changes.push(context, ChildChange::Pruned, place);
            }
            Err(error) => {
                let what = format!("deleting {} {name}", watch.resource.kind);
                if let Some(stop) = tally.fail(context, &error, &what) {
                    return Some(stop);
                }
            }
        }
    }
    None
}

/// How the status names a shared child that other parents share too: `ConfigMap apps/settings (with
/// control/ns/a, control/ns/b and 3 more)`; `None` when this parent is its only one.
fn shared_with(place: &str, child: &ObjectMeta, me: &ParentRef) -> Option<String> {
    other_sharers(child, me).map(|others| format!("{place} (with {others})"))
}

/// Stamps a shared child: the controller's label, the parents' kind, and the digest of its content (see
/// `core/sharing.rs`); the parents themselves are recorded by their own patches, never by the apply.
fn stamp_shared(object: &mut serde_json::Value, link: &Parentage<'_>) {
    let metadata = &mut object["metadata"];
    metadata["labels"][CONTROLLER_LABEL] = link.controller.into();
    metadata["annotations"][PARENT_KIND_ANNOTATION] = link.parent_kind.into();
    if let Some(annotations) = metadata["annotations"].as_object_mut() {
        annotations.remove(SHARED_DIGEST_ANNOTATION);
    }
    let content = serde_json::to_vec(object).unwrap_or_default();
    let sum = ring::digest::digest(&ring::digest::SHA256, &content);
    let hex: String = sum.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    object["metadata"]["annotations"][SHARED_DIGEST_ANNOTATION] = hex.into();
}

/// The child watch that remembers what was applied of `child` in this cluster: the one of its kind that
/// watches its namespace, which delivers it.
fn store_of<'a>(watches: &[&'a ChildWatch], child: &DesiredChild) -> Option<&'a ChildWatch> {
    let namespace = child.namespace.as_deref();
    (watches.iter().copied()).find(|w| w.resource == child.resource && w.covers(namespace))
}

fn is_desired(desired: &DesiredChild, watch: &ChildWatch, meta: &ObjectMeta) -> bool {
    desired.resource == watch.resource
        && desired.namespace == meta.namespace
        && Some(&desired.name) == meta.name.as_ref()
}

// Its helpers serve the tests of the children's other files too.
#[cfg(test)]
pub(super) mod tests;
