//! When this process first saw each parent's deletion under way, on tokio's clock: what the abandon bounds
//! count from.

use std::collections::HashMap;
use std::time::Duration;

use kube::Resource;
use tokio::time::Instant;

/// How long a deletion not looked at is remembered: one in progress is looked at again at least every
/// `error_requeue`. Forgotten, its count starts again when it is next seen (later, never sooner).
const FORGET_DELETION_AFTER: Duration = Duration::from_secs(600);

/// When this process first saw each deletion under way (by the parent's UID and `deletionTimestamp`), on
/// tokio's clock. The abandon bounds count from there: comparing the local wall clock with the server's
/// `deletionTimestamp` would abandon children at once on a clock running ahead, and could not be driven
/// by a test's paused time. A restarted process counts again from its first look.
#[derive(Default)]
pub(crate) struct DeletionsSeen(parking_lot::Mutex<HashMap<String, Seen>>);

/// One deletion: the `deletionTimestamp` it was seen with, when first and when last.
struct Seen {
    requested: Option<String>,
    first: Instant,
    last: Instant,
}

impl DeletionsSeen {
    /// How long this process has seen `object` being deleted (zero on the first look).
    pub(crate) fn deleted_for<K: Resource>(&self, object: &K) -> Duration {
        let (Some(uid), Some(requested)) = (&object.meta().uid, &object.meta().deletion_timestamp)
        else {
            return Duration::ZERO;
        };
        let requested = Some(requested.0.to_string());
        let now = Instant::now();
        let mut seen = self.0.lock();
        seen.retain(|_, s| now.saturating_duration_since(s.last) < FORGET_DELETION_AFTER);
        let entry = seen.entry(uid.clone()).or_insert(Seen {
            requested: requested.clone(),
            first: now,
            last: now,
        });
        if entry.requested != requested {
            // Another deletion of an object that reuses the UID cannot be; a changed timestamp is a new count.
            *entry = Seen {
                requested,
                first: now,
                last: now,
            };
        }
        entry.last = now;
        now.saturating_duration_since(entry.first)
    }

    /// The parent is gone (its finalizer removed): nothing to count any more.
    pub(crate) fn forget(&self, uid: &str) {
        self.0.lock().remove(uid);
    }
}

#[cfg(test)]
mod tests {
    //! How long a deletion has been seen: counted on tokio's clock from this process's first look, whatever
    //! the server's `deletionTimestamp` and the local wall clock say.

    use std::time::Duration;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::DeletionsSeen;
    use crate::engine::test_engine::parent;

    /// A finalizer that holds the parent while its deletion is under way.
    const OURS: &str = "kubeplex.dev/test-controller";

    /// The parent, deleted at `at` by the server's clock.
    fn deleted_at(at: k8s_openapi::jiff::Timestamp) -> k8s_openapi::api::core::v1::ConfigMap {
        let mut deleted = parent(&[OURS]);
        deleted.metadata.deletion_timestamp = Some(Time(at));
        deleted
    }

    #[tokio::test(start_paused = true)]
    async fn a_deletion_counts_from_the_first_look_on_tokios_clock() {
        let seen = DeletionsSeen::default();
        assert_eq!(seen.deleted_for(&parent(&[OURS])), Duration::ZERO);
        // A timestamp a day old (a local clock running ahead looks the same): no time has passed yet.
        let hour = k8s_openapi::jiff::SignedDuration::from_hours(24);
        let deleted = deleted_at(k8s_openapi::jiff::Timestamp::now() - hour);
        assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(seen.deleted_for(&deleted), Duration::from_secs(90));
        // Forgotten once the parent is gone: a later look counts again.
        seen.forget(deleted.metadata.uid.as_deref().unwrap());
        assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deletion_not_looked_at_for_long_is_forgotten_and_counted_again() {
        let seen = DeletionsSeen::default();
        let deleted = deleted_at(k8s_openapi::jiff::Timestamp::now());
        seen.deleted_for(&deleted);
        tokio::time::advance(Duration::from_secs(300)).await;
        assert_eq!(seen.deleted_for(&deleted), Duration::from_secs(300));
        tokio::time::advance(Duration::from_secs(601)).await;
        assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
    }
}
