//! Watches: one shared watcher and cache per (context, kind, namespace, selectors), the type-erased child
//! caches with their parent-UID index, and which changes trigger a reconcile.

mod child_cache;
mod label_index;
mod trigger;
mod watches;

pub(crate) use child_cache::{ChildCache, OpenChildWatch, open_child_watch, open_full_child_watch};
pub(crate) use trigger::ChangeFilter;
pub(crate) use watches::{SharedWatch, WatchKey, WatchRegistry};
