//! The parents whose finalizer a controller removed lately, for the moments its cache still shows it.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
// tokio's clock, so paused-time tests drive the expiry.
use tokio::time::Instant;

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
