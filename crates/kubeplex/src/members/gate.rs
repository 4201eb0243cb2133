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
    /// bounded by its cluster's timeout anyway); whether they did.
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
mod tests {
    //! The member gate in paused time: what a close waits for, and for how long.

    use tokio::time::Instant;

    use super::*;

    /// Closes `name`'s gate on a task of its own, at most a minute.
    fn closing(gate: &Arc<MemberGate>, name: &'static str) -> tokio::task::JoinHandle<bool> {
        let gate = gate.clone();
        tokio::spawn(async move { gate.close(name, Duration::from_secs(60)).await })
    }

    fn names(entered: &[(String, SyncGuard)]) -> Vec<&str> {
        entered.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_leave_waits_for_the_syncs_under_way_and_no_new_one_enters() {
        let gate = Arc::new(MemberGate::default());
        let mut entered = gate.enter(vec!["m".into(), "n".into()]);
        let (_, in_m) = entered.remove(0);
        let closing = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.close("m", Duration::from_secs(15)).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !closing.is_finished(),
            "the leave did not wait for the sync under way"
        );
        // Leaving: no new sync enters m; n is not affected.
        let later = gate.enter(vec!["m".into(), "n".into()]);
        assert_eq!(
            later.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["n"]
        );
        drop(in_m);
        assert!(closing.await.unwrap());
        assert!(gate.is_leaving("m"));
        gate.open("m");
        assert_eq!(gate.enter(vec!["m".into()]).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_never_ends_holds_a_leave_back_only_until_its_limit() {
        let gate = Arc::new(MemberGate::default());
        let _stuck = gate.enter(vec!["m".into()]);
        let started = Instant::now();
        assert!(!gate.close("m", Duration::from_secs(15)).await);
        assert_eq!(started.elapsed(), Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn a_close_waits_for_every_sync_of_its_member_not_only_the_first_to_end() {
        let gate = Arc::new(MemberGate::default());
        let mut first = gate.enter(vec!["m".into(), "n".into()]);
        let second = gate.enter(vec!["m".into()]);
        let started = Instant::now();
        let close = closing(&gate, "m");
        tokio::time::sleep(Duration::from_secs(1)).await;
        first.remove(0);
        // Another member's last sync ends too: it wakes the close, which must go on waiting.
        drop(first);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !close.is_finished(),
            "the close ended with a sync of m under way"
        );
        drop(second);
        assert!(close.await.unwrap());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_close_of_an_idle_member_ends_at_once_and_leaves_it_closed() {
        let gate = Arc::new(MemberGate::default());
        let _elsewhere = gate.enter(vec!["n".into()]);
        let started = Instant::now();
        assert!(gate.close("m", Duration::from_secs(60)).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert!(gate.is_leaving("m") && !gate.is_leaving("n"));
        assert_eq!(names(&gate.enter(vec!["m".into(), "n".into()])), ["n"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_during_a_close_lets_syncs_in_again_and_the_close_still_waits_until_the_member_is_idle()
     {
        let gate = Arc::new(MemberGate::default());
        let before = gate.enter(vec!["m".into()]);
        let started = Instant::now();
        let close = closing(&gate, "m");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(gate.is_leaving("m"));
        gate.open("m");
        assert!(!gate.is_leaving("m"));
        let after = gate.enter(vec!["m".into()]);
        assert_eq!(names(&after), ["m"], "open, the gate lets syncs in");
        // The close does not end while a sync is under way in m, whichever side of the open it entered on,
        // and it does not close the gate again.
        drop(before);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!close.is_finished());
        drop(after);
        assert!(close.await.unwrap());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(!gate.is_leaving("m"));
    }
}
