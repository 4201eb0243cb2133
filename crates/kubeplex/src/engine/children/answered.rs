//! Children just applied, judged from the apply's answer until their watch delivers them.
//!
//! A new child is in the server before it is in the cache: the status written right after its apply would
//! call it `Missing`, and be written again a moment later when the watch delivers it. Judged from what the
//! server answered, it reads then what the cache will read.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::core::ChildHealth;

/// Entries kept at most: they last from an apply until the cache has the child, so only a cache that
/// stopped delivering would fill them; then the oldest are dropped and those children read from the cache.
const MOST: usize = 4096;

/// The children of one child watch applied but not yet cached, by namespace and name.
#[derive(Default)]
pub(crate) struct Answered(Mutex<HashMap<Key, Entry>>);

/// A child's namespace and name.
type Key = (Option<String>, String);

/// What an apply of a child answered.
struct Entry {
    health: ChildHealth,
    /// The object's UID and resourceVersion, as the apply answered.
    uid: Option<String>,
    version: Option<String>,
    /// The UID of the parent it was applied for.
    parent: String,
}

/// A child this process applied for a parent, as the apply answered: what the next apply for the same
/// parent may take as its own until the watch delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) uid: String,
    pub(crate) version: Option<String>,
}

impl Answered {
    /// The apply of the child `name` in `namespace` for the parent `parent` (its UID) was answered with
    /// `meta`; `health` is how the answer reads.
    pub(crate) fn record(
        &self,
        namespace: Option<&str>,
        name: &str,
        (meta, parent): (&kube::api::ObjectMeta, &str),
        health: ChildHealth,
    ) {
        let mut answered = self.0.lock();
        if answered.len() >= MOST {
            answered.clear();
        }
        let key = (namespace.map(str::to_owned), name.to_owned());
        let entry = Entry {
            health,
            uid: meta.uid.clone(),
            version: meta.resource_version.clone(),
            parent: parent.to_owned(),
        };
        answered.insert(key, entry);
    }

    /// The child `name` in `namespace` as its last apply for the parent `parent` answered, if that apply
    /// was for this parent and the watch has not delivered the child yet.
    pub(crate) fn applied_for(
        &self,
        namespace: Option<&str>,
        name: &str,
        parent: &str,
    ) -> Option<Answer> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        let answered = self.0.lock();
        let entry = answered.get(&key).filter(|e| e.parent == parent)?;
        Some(Answer {
            uid: entry.uid.clone()?,
            version: entry.version.clone(),
        })
    }

    /// How the last apply of the child read, if its watch has not delivered it yet.
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<ChildHealth> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        self.0.lock().get(&key).map(|e| e.health.clone())
    }

    /// The UIDs of the children applied whose watch had not delivered them when last looked at.
    pub(crate) fn uids(&self) -> Vec<String> {
        let answered = self.0.lock();
        answered.values().filter_map(|e| e.uid.clone()).collect()
    }

    /// The cache has the child (or it is gone): the cache is the truth again.
    pub(crate) fn forget(&self, namespace: Option<&str>, name: &str) {
        let mut answered = self.0.lock();
        if !answered.is_empty() {
            answered.remove(&(namespace.map(str::to_owned), name.to_owned()));
        }
    }
}
