//! What a sync of children changed in other clusters — created, updated, pruned, kept or orphaned — and how
//! it is told on the parent as Events.

use kube::api::ObjectMeta;
use parking_lot::Mutex;

use crate::engine::status::events::Note;

/// What became of a child in another cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ChildChange {
    Created,
    Updated,
    Pruned,
    /// No longer declared, unlinked and left in place (prune policy keep).
    Kept,
    /// Its parent deleted, unlinked and left in place (delete policy orphan).
    Orphaned,
    /// Shared with the parents that declared it before: this parent is recorded on it.
    Joined,
    /// Shared, no longer declared by this parent (or its parent deleted): left to the others.
    Released,
}

/// The children a sync changed, in every cluster, as they happen (so that a cluster cut off by its cap
/// still reports what it did before).
#[derive(Default)]
pub(crate) struct ChildChanges(Mutex<Vec<(String, ChildChange, String)>>);

impl ChildChanges {
    pub(crate) fn push(&self, context: &str, change: ChildChange, place: String) {
        let mut changes = self.0.lock();
        changes.push((context.to_owned(), change, place));
    }

    /// One event per cluster and kind of change, naming the cluster and the children (`ChildCreated`,
    /// `ChildUpdated`, `ChildPruned`, `ChildrenKept`, `ChildrenOrphaned`); an event repeated with the same
    /// children is a series.
    pub(crate) fn notes(self) -> Vec<Note> {
        let mut grouped: std::collections::BTreeMap<(String, ChildChange), Vec<String>> =
            Default::default();
        for (context, change, place) in self.0.into_inner() {
            grouped.entry((context, change)).or_default().push(place);
        }
        grouped
            .into_iter()
            .map(|((context, change), places)| {
                let (reason, action, done) = match change {
                    ChildChange::Created => ("ChildCreated", "Apply", "created"),
                    ChildChange::Updated => ("ChildUpdated", "Apply", "updated"),
                    ChildChange::Pruned => ("ChildPruned", "Delete", "deleted (no longer desired)"),
                    ChildChange::Kept => (
                        "ChildrenKept",
                        "Unlink",
                        "kept, unlinked and left in place (no longer declared; prune policy keep)",
                    ),
                    ChildChange::Orphaned => (
                        "ChildrenOrphaned",
                        "Unlink",
                        "orphaned, unlinked and left in place (the parent is deleted; delete policy orphan)",
                    ),
                    ChildChange::Joined => (
                        "ChildShared",
                        "Apply",
                        "shared with the other parents that declare it",
                    ),
                    ChildChange::Released => (
                        "ChildReleased",
                        "Unlink",
                        "left to the other parents that share it",
                    ),
                };
                let message = format!("{done} in {context}: {}", places.join(", "));
                Note::normal(reason, action, message).alone()
            })
            .collect()
    }
}

/// What applying did to a child that was `before` (as the cache or the server had it): created, changed
/// (a new generation, or for kinds without one a new resourceVersion), or nothing.
pub(crate) fn change_of(before: Option<&ObjectMeta>, after: &ObjectMeta) -> Option<ChildChange> {
    let Some(before) = before else {
        return Some(ChildChange::Created);
    };
    if before.uid.is_some() && after.uid.is_some() && before.uid != after.uid {
        return Some(ChildChange::Created);
    }
    let changed = match (before.generation, after.generation) {
        (Some(old), Some(new)) => old != new,
        _ => before.resource_version != after.resource_version,
    };
    changed.then_some(ChildChange::Updated)
}
