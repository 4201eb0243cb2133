//! What a controller last applied of each child in one child watch, so that a child that is current is
//! not applied again.
//!
//! A reconcile applies every child it wants, in every cluster. Most of those applies change nothing: the
//! parent's reconcile ran for another reason (a member joined, another cluster's child changed, a resync).
//! The API server moves an object's resourceVersion on every write, so a child whose cached
//! resourceVersion is still the one its last apply returned has not been written by anyone since; if the
//! object the reconcile wants is also the one applied then, applying it again would change nothing. A
//! write by someone else moves the resourceVersion, and its watch event queues the parent, whose apply
//! then repairs the child.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use parking_lot::Mutex;
use serde_json::Value;

use crate::core::version_number;

/// Entries kept at least, however few children are cached: a sweep costs a pass over the cache.
const SWEEP_FLOOR: usize = 1024;

/// The children one controller applied through one child watch, by the hash of their UID: the digest of
/// the object sent and the resourceVersion the server answered with.
#[derive(Default)]
pub(crate) struct Applied(Mutex<Entries>);

#[derive(Default)]
struct Entries {
    by_uid: HashMap<u64, Written>,
    /// When `by_uid` grows past this, entries of children no longer cached are dropped.
    sweep_at: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Written {
    digest: u64,
    version: u64,
}

/// The digest of an object as it is sent: equal objects, built the same way, have equal digests.
pub(crate) fn digest(object: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Serialized, not hashed as a tree: `Value` is not `Hash`, and the bytes are what the server gets.
    serde_json::to_vec(object)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

impl Applied {
    /// Whether the child with this UID and cached resourceVersion is `digest` as this controller last
    /// applied it, unwritten since.
    pub(crate) fn is_current(&self, uid: Option<&str>, version: Option<&str>, digest: u64) -> bool {
        let (Some(uid), Some(version)) = (uid, version_number(version)) else {
            return false;
        };
        let entries = self.0.lock();
        entries.by_uid.get(&key(uid)) == Some(&Written { digest, version })
    }

    /// The apply of `digest` to the child with this UID was answered with `version`. `cached` gives the
    /// UIDs of the children in the cache, when the entries are to be swept.
    pub(crate) fn record(
        &self,
        uid: Option<&str>,
        version: Option<&str>,
        digest: u64,
        cached: impl FnOnce() -> Vec<String>,
    ) {
        let Some(uid) = uid else {
            return;
        };
        let mut entries = self.0.lock();
        match version_number(version) {
            Some(version) => entries.by_uid.insert(key(uid), Written { digest, version }),
            None => entries.by_uid.remove(&key(uid)),
        };
        if entries.by_uid.len() > entries.sweep_at.max(SWEEP_FLOOR) {
            // Children deleted since (by a prune, a parent's removal or by hand) leave their entries; what
            // the cache no longer holds goes, and the next sweep waits until the map has doubled.
            let live: HashSet<u64> = cached().iter().map(|uid| key(uid)).collect();
            entries.by_uid.retain(|uid, _| live.contains(uid));
            entries.sweep_at = entries.by_uid.len().saturating_mul(2);
        }
    }

    /// How many children are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().by_uid.len()
    }
}

fn key(uid: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Applied, SWEEP_FLOOR, digest};

    #[test]
    fn a_child_is_current_while_its_version_and_object_are_the_ones_applied() {
        let applied = Applied::default();
        let object = digest(&json!({"spec": {"replicas": 2}}));
        applied.record(Some("uid-1"), Some("41"), object, Vec::new);
        assert!(applied.is_current(Some("uid-1"), Some("41"), object));
        // Written since by anyone: its version moved.
        assert!(!applied.is_current(Some("uid-1"), Some("42"), object));
        // The reconcile wants something else now.
        let other = digest(&json!({"spec": {"replicas": 3}}));
        assert!(!applied.is_current(Some("uid-1"), Some("41"), other));
        // Another child (recreated under the same name: a new UID).
        assert!(!applied.is_current(Some("uid-2"), Some("41"), object));
    }

    #[test]
    fn what_cannot_be_compared_is_never_current() {
        let applied = Applied::default();
        let object = digest(&json!({}));
        applied.record(Some("uid-1"), Some("not-a-number"), object, Vec::new);
        assert!(!applied.is_current(Some("uid-1"), Some("not-a-number"), object));
        assert_eq!(applied.len(), 0);
        applied.record(Some("uid-1"), Some("7"), object, Vec::new);
        assert!(!applied.is_current(None, Some("7"), object));
        assert!(!applied.is_current(Some("uid-1"), None, object));
    }

    #[test]
    fn equal_objects_have_equal_digests_and_others_differ() {
        let a = json!({"metadata": {"name": "web", "labels": {"a": "1"}}, "spec": {"replicas": 2}});
        assert_eq!(digest(&a), digest(&a.clone()));
        let b = json!({"metadata": {"name": "web", "labels": {"a": "2"}}, "spec": {"replicas": 2}});
        assert_ne!(digest(&a), digest(&b));
    }

    #[test]
    fn children_no_longer_cached_are_swept_once_the_map_has_grown() {
        let applied = Applied::default();
        let object = digest(&json!({}));
        let uids: Vec<String> = (0..=SWEEP_FLOOR).map(|i| format!("uid-{i}")).collect();
        // Only the last ten are still in the cache when the sweep comes.
        let cached: Vec<String> = uids[uids.len() - 10..].to_vec();
        for (i, uid) in uids.iter().enumerate() {
            let cached = cached.clone();
            applied.record(Some(uid), Some(&i.to_string()), object, move || cached);
        }
        assert_eq!(applied.len(), 10);
        let last = uids.len() - 1;
        assert!(applied.is_current(Some(&uids[last]), Some(&last.to_string()), object));
        assert!(!applied.is_current(Some(&uids[0]), Some("0"), object));
    }
}
