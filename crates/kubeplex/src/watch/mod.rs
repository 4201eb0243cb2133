//! Watches: one shared watcher and cache per (cluster, kind, namespace, selectors), the type-erased child
//! caches with their parent-UID index, and which changes trigger a reconcile.

mod child_cache;
mod label_index;
mod projected;
mod trigger;
mod watches;

pub(crate) use child_cache::{
    ChildCache, OpenChildWatch, missing, open_child_watch, open_full_child_watch,
};
#[cfg(test)]
pub(crate) use child_cache::{ParentSink, judged};
pub(crate) use trigger::{ChangeFilter, ChildChangeKind};
pub(crate) use watches::{SharedWatch, WatchKey, WatchRegistry};
