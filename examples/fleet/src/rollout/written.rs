//! What the deployer remembers of the rollout statuses it wrote lately, for the moments the parent's cache
//! trails them: a reconcile that starts before the cache shows a write must compare with what was written,
//! or it would tell a transition twice and give a cluster behind a record older than its last one.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use kube::Resource;
// tokio's clock, as the runtime's.
use tokio::time::Instant;

use crate::app::{AppDeployment, RolloutStatus};

/// How long a write is remembered: the cache shows it within moments.
const REMEMBER: Duration = Duration::from_secs(60);

/// The rollout statuses written lately, by parent UID, with the resourceVersion each write made.
///
/// One per process, whatever the number of managers in it: what it holds is what the API server has at
/// that resourceVersion, true for any of them. ResourceVersions of one resource are increasing integers
/// (as `k8s.io/apimachinery`'s `CompareResourceVersion` compares them); one that does not parse counts as
/// caught up.
#[derive(Default)]
pub(crate) struct Written(Mutex<HashMap<String, Write>>);

/// A write: the resourceVersion it made, the `status.rollout` it left, and when.
type Write = (u64, Option<RolloutStatus>, Instant);

/// The deployer's memory.
pub(crate) static WRITTEN: LazyLock<Written> = LazyLock::new(Written::default);

impl Written {
    /// Remembers that `app`'s `status.rollout` is `status` from `version` (the write's answer) on.
    pub(crate) fn record(
        &self,
        app: &AppDeployment,
        version: Option<&str>,
        status: Option<RolloutStatus>,
    ) {
        let (Some(uid), Some(version)) = (app.meta().uid.clone(), parse(version)) else {
            return;
        };
        let mut written = self.0.lock().unwrap_or_else(|e| e.into_inner());
        written.retain(|_, (_, _, at)| at.elapsed() < REMEMBER);
        written.insert(uid, (version, status, Instant::now()));
    }

    /// `app`'s `status.rollout` as of the last write, when the cached `app` is older than that write; else
    /// the cached one.
    pub(crate) fn rollout_of(&self, app: &AppDeployment) -> Option<RolloutStatus> {
        let cached = || app.status.as_ref().and_then(|s| s.rollout.clone());
        let Some(uid) = app.meta().uid.as_ref() else {
            return cached();
        };
        let mut written = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (
            written.get(uid),
            parse(app.meta().resource_version.as_deref()),
        ) {
            (Some((version, status, _)), Some(seen)) if seen < *version => status.clone(),
            (Some(_), _) => {
                // The cache has caught up (or went on): it is the truth again.
                written.remove(uid);
                cached()
            }
            (None, _) => cached(),
        }
    }
}

fn parse(version: Option<&str>) -> Option<u64> {
    version?.parse().ok()
}
