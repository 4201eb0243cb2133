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

/// The children of one child watch applied but not yet cached, by namespace and name, with the UID the
/// apply answered.
#[derive(Default)]
pub(crate) struct Answered(Mutex<HashMap<Key, (ChildHealth, Option<String>)>>);

/// A child's namespace and name.
type Key = (Option<String>, String);

impl Answered {
    /// The apply of the child `name` in `namespace` was answered with an object of `uid`; `health` is how
    /// the answer reads.
    pub(crate) fn record(
        &self,
        namespace: Option<&str>,
        name: &str,
        uid: Option<&str>,
        health: ChildHealth,
    ) {
        let mut answered = self.0.lock();
        if answered.len() >= MOST {
            answered.clear();
        }
        let key = (namespace.map(str::to_owned), name.to_owned());
        answered.insert(key, (health, uid.map(str::to_owned)));
    }

    /// How the last apply of the child read, if its watch has not delivered it yet.
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<ChildHealth> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        self.0.lock().get(&key).map(|(health, _)| health.clone())
    }

    /// The UIDs of the children applied whose watch had not delivered them when last looked at.
    pub(crate) fn uids(&self) -> Vec<String> {
        let answered = self.0.lock();
        answered
            .values()
            .filter_map(|(_, uid)| uid.clone())
            .collect()
    }

    /// The cache has the child (or it is gone): the cache is the truth again.
    pub(crate) fn forget(&self, namespace: Option<&str>, name: &str) {
        let mut answered = self.0.lock();
        if !answered.is_empty() {
            answered.remove(&(namespace.map(str::to_owned), name.to_owned()));
        }
    }
}
