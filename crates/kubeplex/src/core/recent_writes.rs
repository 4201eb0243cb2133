//! A controller's memo of its own recent writes, for the moments its cache trails them.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use kube::Resource;
use parking_lot::Mutex;
// tokio's clock, so paused-time tests drive the expiry.
use tokio::time::Instant;

use super::resource::version_number;

/// How long a write is remembered by default: a cache shows a write within moments.
const REMEMBER: Duration = Duration::from_secs(60);

/// What a controller wrote to objects lately (a status, a part of one), by object UID, with the
/// resourceVersion each write returned: what to read instead of the cache while the cache is older
/// than the write.
///
/// A watch cache shows a write a moment after the write. A reconcile of the same object that starts before
/// it does (queued by a child's change while the write was in flight) reads the object as it was before
/// that write; one that compares what it wants with what the object says would write the same thing
/// again, tell a transition twice, or decide from a record older than its last one. Record each write
/// with the resourceVersion its answer carries, and read [`newer_than`](Self::newer_than) before the
/// cached object: while the cached resourceVersion is older than the write's, it gives what was written;
/// once the cache has caught up (or went on, written by someone else), the cache is the truth again and
/// the entry is forgotten.
///
/// ResourceVersions of one object are compared as the increasing integers etcd makes them (as
/// `k8s.io/apimachinery`'s `CompareResourceVersion` does); a write whose resourceVersion does not parse is
/// not remembered, and a cached object whose resourceVersion does not parse counts as caught up. An object
/// without a UID is never remembered. Entries last at most [`remember_for`](Self::remember_for) (60 s by
/// default), whether or not the cache showed them.
///
/// It locks inside (`&self` suffices), so a reconciler keeps one in a field and its reconciles, running at
/// once for different objects, share it.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
/// use kubeplex::status::RecentWrites;
///
/// /// A `ConfigMap` as a cache has it, at `version`, saying `phase`.
/// fn cached(version: &str, phase: &str) -> ConfigMap {
///     ConfigMap {
///         metadata: ObjectMeta {
///             uid: Some("uid-1".into()),
///             resource_version: Some(version.into()),
///             ..ObjectMeta::default()
///         },
///         data: Some([("phase".to_owned(), phase.to_owned())].into()),
///         ..ConfigMap::default()
///     }
/// }
/// /// What the object says, or what this controller wrote when the cache does not show it yet.
/// fn phase(written: &RecentWrites<String>, object: &ConfigMap) -> String {
///     written
///         .newer_than(object)
///         .unwrap_or_else(|| object.data.as_ref().unwrap()["phase"].clone())
/// }
///
/// let written = RecentWrites::new();
/// let before = cached("41", "Progressing");
/// // The write's answer carried resourceVersion 42.
/// written.record(&before, Some("42"), "Complete".to_owned());
///
/// // A reconcile queued during the write still gets the object at 41: it reads what was written.
/// assert_eq!(phase(&written, &before), "Complete");
/// // The cache caught up (or someone wrote after): the object is the truth again.
/// assert_eq!(phase(&written, &cached("43", "Progressing")), "Progressing");
/// assert_eq!(written.newer_than(&before), None, "forgotten once caught up");
/// ```
pub struct RecentWrites<V> {
    entries: Mutex<HashMap<String, Write<V>>>,
    remember: Duration,
}

/// One write: the resourceVersion it returned, what it wrote, and when.
struct Write<V> {
    version: u64,
    value: V,
    at: Instant,
}

impl<V> RecentWrites<V> {
    /// A memo that remembers each write for 60 s at most.
    pub fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            remember: REMEMBER,
        }
    }

    /// Remembers each write for `how_long` at most (instead of 60 s): longer for caches that trail their
    /// writes by more, shorter to hold less.
    #[must_use]
    pub fn remember_for(mut self, how_long: Duration) -> Self {
        self.remember = how_long;
        self
    }

    /// Remembers that `object` holds `value` from `written_version` on: the resourceVersion the write's
    /// answer carried (`None`, or one that does not parse, forgets what was remembered of it instead).
    pub fn record(&self, object: &impl Resource, written_version: Option<&str>, value: V) {
        let Some(uid) = object.meta().uid.as_ref() else {
            return;
        };
        let mut entries = self.entries.lock();
        let remember = self.remember;
        entries.retain(|_, write| write.at.elapsed() < remember);
        match version_number(written_version) {
            Some(version) => {
                let at = Instant::now();
                entries.insert(uid.clone(), Write { version, value, at });
            }
            None => {
                entries.remove(uid);
            }
        }
    }

    /// How many objects' writes are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no write is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<V: Clone> RecentWrites<V> {
    /// What was last written to the object, while the `cached` object is older than that write; `None`
    /// when nothing is remembered of it or the cache has caught up (the entry is then forgotten).
    pub fn newer_than(&self, cached: &impl Resource) -> Option<V> {
        let uid = cached.meta().uid.as_ref()?;
        let seen = version_number(cached.meta().resource_version.as_deref());
        let mut entries = self.entries.lock();
        let write = entries.get(uid)?;
        match seen {
            Some(seen) if seen < write.version && write.at.elapsed() < self.remember => {
                Some(write.value.clone())
            }
            _ => {
                // The cache has caught up (or went on, or cannot tell), or the write is too old to trust.
                entries.remove(uid);
                None
            }
        }
    }
}

impl<V> Default for RecentWrites<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> fmt::Debug for RecentWrites<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecentWrites")
            .field("remembered", &self.len())
            .field("remember", &self.remember)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    /// An object with this UID at this resourceVersion, as a cache has it.
    fn object(uid: Option<&str>, version: Option<&str>) -> ConfigMap {
        let metadata = ObjectMeta {
            uid: uid.map(str::to_owned),
            resource_version: version.map(str::to_owned),
            ..ObjectMeta::default()
        };
        ConfigMap {
            metadata,
            ..ConfigMap::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_cache_older_than_the_write_reads_what_was_written_until_it_catches_up() {
        let written = RecentWrites::new();
        let at = |version| object(Some("uid-1"), Some(version));
        assert_eq!(written.newer_than(&at("5")), None, "nothing written");
        written.record(&at("5"), Some("7"), "halted");
        assert_eq!(written.newer_than(&at("6")), Some("halted"), "6 trails 7");
        let other = object(Some("uid-2"), Some("6"));
        assert_eq!(written.newer_than(&other), None, "another object");
        assert_eq!(written.newer_than(&at("7")), None, "caught up");
        assert_eq!(written.newer_than(&at("6")), None, "forgotten");
        assert!(written.is_empty());

        written.record(&at("7"), Some("9"), "complete");
        assert_eq!(written.newer_than(&at("10")), None, "went on");
        assert!(written.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_forgotten_after_its_time_whatever_the_cache_shows() {
        let written = RecentWrites::new().remember_for(Duration::from_secs(5));
        let at = |version| object(Some("uid-1"), Some(version));
        written.record(&at("1"), Some("2"), 'a');
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(written.newer_than(&at("1")), Some('a'));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(written.newer_than(&at("1")), None);
        assert!(written.is_empty());

        // Entries past their time are swept by the next record.
        written.record(&object(Some("uid-2"), None), Some("2"), 'b');
        tokio::time::advance(Duration::from_secs(5)).await;
        written.record(&object(Some("uid-3"), None), Some("2"), 'c');
        assert_eq!(written.len(), 1);
    }

    #[test]
    fn what_cannot_be_compared_is_not_taken_as_newer() {
        let written = RecentWrites::new();
        written.record(&object(None, Some("1")), Some("2"), 1);
        assert!(written.is_empty(), "no UID");
        written.record(&object(Some("uid-1"), Some("1")), Some("2"), 1);
        assert_eq!(written.newer_than(&object(Some("uid-1"), Some("x"))), None);
        assert!(
            written.is_empty(),
            "a cached version that does not parse: caught up"
        );
        written.record(&object(Some("uid-1"), Some("1")), Some("2"), 1);
        written.record(&object(Some("uid-1"), Some("2")), Some("etcd-free"), 2);
        assert!(
            written.is_empty(),
            "a write that does not parse forgets the one before"
        );
    }

    #[test]
    fn it_is_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<RecentWrites<String>>();
    }
}
