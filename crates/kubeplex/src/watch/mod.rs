//! Watches: one shared watcher and cache per (cluster, kind, namespace, selectors), the type-erased child
//! caches with their parent-UID index, the watches of other kinds mapped to parents, and which changes
//! trigger a reconcile.

mod child_cache;
mod input;
mod label_index;
mod projected;
mod trigger;
mod watches;

pub(crate) use child_cache::{
    ChildCache, OpenChildWatch, missing, open_child_watch, open_full_child_watch,
};
#[cfg(test)]
pub(crate) use child_cache::{DeliveredSink, ParentSink, judged};
pub use input::MapFn;
pub(crate) use input::{InputPlace, InputWatch, Wanted, open_input};
pub(crate) use trigger::{ChangeFilter, ChildChangeKind};
pub(crate) use watches::{SharedWatch, WatchKey, WatchRegistry};
