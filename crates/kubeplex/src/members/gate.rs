//! Which members are leaving, and how many child syncs are under way in each: a leave closes a member's
//! gate and waits for the syncs under way there, so that an apply already started cannot re-create a child
//! after the leave deleted it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::core::Shrink;

/// The gate of every member.
#[derive(Default)]
pub(super) struct MemberGate {
    state: Mutex<GateState>,
    /// Told when a member's last sync under way ends.
    idle: Notify,
}

#[derive(Default)]
struct GateState {
    leaving: BTreeSet<String>,
    busy: HashMap<String, usize>,
}

/// A child sync under way in a member; dropping it ends it.
pub(crate) struct SyncGuard {
    gate: Arc<MemberGate>,
    name: String,
}

impl MemberGate {
    /// Whether member `name` is leaving.
    pub(crate) fn is_leaving(&self, name: &str) -> bool {
        self.state.lock().leaving.contains(name)
    }

    /// The members leaving now.
    pub(crate) fn leaving(&self) -> BTreeSet<String> {
        self.state.lock().leaving.clone()
    }

    /// A sync begins in each of `names` that is not leaving; decided at once for all of them, so that a
    /// leave either sees the sync or the sync sees the leave.
    pub(crate) fn enter(self: &Arc<Self>, names: Vec<String>) -> Vec<(String, SyncGuard)> {
        let mut state = self.state.lock();
        let open: Vec<String> = names
            .into_iter()
            .filter(|n| !state.leaving.contains(n))
            .collect();
        for name in &open {
            *state.busy.entry(name.clone()).or_default() += 1;
        }
        drop(state);
        let guard = |name: &String| SyncGuard {
            gate: self.clone(),
            name: name.clone(),
        };
        open.into_iter().map(|n| (n.clone(), guard(&n))).collect()
    }

    /// Closes `name`'s gate and waits until its syncs under way have ended, at most `limit` (a sync is
    /// bounded by its context's timeout anyway); whether they did.
    pub(crate) async fn close(&self, name: &str, limit: Duration) -> bool {
        self.state.lock().leaving.insert(name.to_owned());
        let drained = async {
            loop {
                // Registered before the count is read: an end in between still wakes this.
                let ended = self.idle.notified();
                if self.state.lock().busy.get(name).copied().unwrap_or(0) == 0 {
                    return;
                }
                ended.await;
            }
        };
        tokio::time::timeout(limit, drained).await.is_ok()
    }

    /// Opens `name`'s gate again (it left, or joins again).
    pub(crate) fn open(&self, name: &str) {
        self.state.lock().leaving.remove(name);
    }
}

impl Drop for SyncGuard {
    fn drop(&mut self) {
        let mut state = self.gate.state.lock();
        if let Some(count) = state.busy.get_mut(&self.name) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.busy.remove(&self.name);
                state.busy.shrink_when_sparse();
                drop(state);
                self.gate.idle.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod tests;
