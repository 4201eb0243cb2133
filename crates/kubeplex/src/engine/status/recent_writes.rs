//! What a controller remembers of its own recent writes, for the moments its caches trail them: a reconcile
//! queued while a write was in flight must not act on the object as it was before that write.

use std::collections::HashMap;
use std::time::Duration;

use kube::Resource;
use parking_lot::Mutex;
// tokio's clock, so paused-time tests drive the expiry.
use tokio::time::Instant;

use crate::core::{FleetStatus, version_number};

/// How long a written status is remembered: the cache shows a write within moments.
const REMEMBER_WRITTEN: Duration = Duration::from_secs(60);

/// The statuses a controller wrote lately, by object UID, with the resourceVersion each write made.
///
/// The cache shows a status write a moment after the write; a reconcile of the same object that starts
/// before it does (queued by a child's change while the write was in flight) would compare against the
/// status before the write and write the same one again. ResourceVersions of one resource are increasing
/// integers (as `k8s.io/apimachinery`'s `CompareResourceVersion` compares them); one that does not parse
/// counts as caught up.
#[derive(Default)]
pub(crate) struct WrittenStatus(Mutex<HashMap<String, (u64, FleetStatus, Instant)>>);

impl WrittenStatus {
    pub(crate) fn record(
        &self,
        object: &impl Resource,
        version: Option<String>,
        status: FleetStatus,
    ) {
        let (Some(uid), Some(version)) = (
            object.meta().uid.clone(),
            version_number(version.as_deref()),
        ) else {
            return;
        };
        let mut written = self.0.lock();
        written.retain(|_, (_, _, at)| at.elapsed() < REMEMBER_WRITTEN);
        written.insert(uid, (version, status, Instant::now()));
    }

    /// The status last written to `object`, if the cached `object` is older than that write.
    pub(crate) fn newer_than(&self, object: &impl Resource) -> Option<FleetStatus> {
        let uid = object.meta().uid.as_ref()?;
        let mut written = self.0.lock();
        let cached = version_number(object.meta().resource_version.as_deref());
        match (written.get(uid), cached) {
            (Some((version, status, _)), Some(cached)) if cached < *version => Some(status.clone()),
            (Some(_), _) => {
                // The cache has caught up (or went on): it is the truth again.
                written.remove(uid);
                None
            }
            (None, _) => None,
        }
    }
}

/// How long a finalized parent is remembered: its cache shows the finalizer's removal within moments.
const REMEMBER_FINALIZED: Duration = Duration::from_secs(300);

/// The parents (by UID) whose finalizer this controller removed lately. A finalizer cannot be added back to
/// an object being deleted, so such a parent is never finalized again, whatever a lagging cache still shows.
#[derive(Default)]
pub(crate) struct Finalized(Mutex<HashMap<String, Instant>>);

impl Finalized {
    pub(crate) fn insert(&self, uid: &str) {
        let mut finalized = self.0.lock();
        finalized.retain(|_, at| at.elapsed() < REMEMBER_FINALIZED);
        finalized.insert(uid.to_owned(), Instant::now());
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        let finalized = self.0.lock();
        finalized
            .get(uid)
            .is_some_and(|at| at.elapsed() < REMEMBER_FINALIZED)
    }
}
