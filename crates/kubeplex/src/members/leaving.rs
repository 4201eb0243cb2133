//! A leave under way, as the controllers carrying it out share it: what each waits for (a member that does
//! not answer cannot have its children listed, so not deleted), when they give up, and whether they did.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::changes::Slot;
use crate::readiness::{Phase, Readiness};

/// Why a standby's part of a leave waits.
pub(crate) const STANDS_BY: &str = "this replica stands by: the leader deletes them";

/// One member's leave, shared by every controller.
pub(crate) struct LeaveProgress {
    name: String,
    slot: Slot,
    /// After how long a member that does not answer has its children abandoned (`None`: never).
    give_up_after: Option<Duration>,
    started: Instant,
    readiness: Arc<Readiness>,
    state: Mutex<LeaveState>,
    /// Becomes `true` once the member is forgotten: no longer counted as leaving.
    forgotten: watch::Sender<bool>,
}

#[derive(Default)]
struct LeaveState {
    /// What each controller waits for.
    waits: BTreeMap<String, String>,
    /// Why children were abandoned, when they were.
    abandoned: Option<String>,
}

impl LeaveProgress {
    pub(crate) fn new(
        name: &str,
        slot: Slot,
        give_up_after: Option<Duration>,
        readiness: Arc<Readiness>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            slot,
            give_up_after,
            started: Instant::now(),
            readiness,
            state: Mutex::default(),
            forgotten: watch::Sender::new(false),
        }
    }

    /// The member is forgotten: every controller's part has ended and the member no longer counts as
    /// leaving.
    pub(crate) fn forget(&self) {
        self.forgotten.send_replace(true);
    }

    /// Ends once the member is forgotten, or once the leave itself is dropped (nothing then counts it as
    /// leaving either). Holds no reference to the progress, so that a dropped leave is seen.
    pub(crate) fn forgotten(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut forgotten = self.forgotten.subscribe();
        async move {
            let _ = forgotten.wait_for(|forgotten| *forgotten).await;
        }
    }

    /// When the controllers stop waiting for the member and abandon its children (`None`: never).
    pub(crate) fn give_up_at(&self) -> Option<Instant> {
        self.give_up_after.map(|after| self.started + after)
    }

    /// How long the controllers wait for a member that does not answer.
    pub(crate) fn give_up_after(&self) -> Option<Duration> {
        self.give_up_after
    }

    /// `controller`'s part waits for `reason` (the member does not answer, or refuses): the leave stops taking a slot
    /// of the member changes, and `/readyz` and the parents' status say why it waits.
    pub(crate) fn waits(&self, controller: &str, reason: String) {
        let mut state = self.lock();
        if state.waits.get(controller) == Some(&reason) {
            return;
        }
        let give_up = match self.give_up_after {
            Some(after) => {
                format!("until {after:?} after the leave began, then they are abandoned")
            }
            None => "for as long as it takes".to_owned(),
        };
        tracing::warn!(cluster = %self.name, controller, problem = %reason, "member's leave waits: its children cannot be deleted yet (the member does not answer, or refuses); tried again {give_up}");
        state.waits.insert(controller.to_owned(), reason.clone());
        drop(state);
        self.slot.park();
        let why = format!(
            "its children to be deleted, tried again until the member answers and allows it: {reason}"
        );
        self.readiness
            .member_phase(&self.name, Some(Phase::Leaving(Some(why))));
    }

    /// `controller`'s part waits for the leader to delete the children (this replica stands by): shown as
    /// [`waits`](Self::waits) shows it, logged at `debug` only, since nothing is wrong.
    pub(crate) fn waits_for_the_leader(&self, controller: &str) {
        let reason = STANDS_BY.to_owned();
        let mut state = self.lock();
        if state.waits.get(controller) == Some(&reason) {
            return;
        }
        tracing::debug!(cluster = %self.name, controller, "member's leave: its children are deleted by the leader");
        state.waits.insert(controller.to_owned(), reason.clone());
        drop(state);
        self.slot.park();
        let why = format!("its children to be deleted: {reason}");
        self.readiness
            .member_phase(&self.name, Some(Phase::Leaving(Some(why))));
    }

    /// `controller`'s part no longer waits: the member answered.
    pub(crate) fn answered(&self, controller: &str) {
        let mut state = self.lock();
        let waited = state.waits.remove(controller);
        if waited.is_some() && state.waits.is_empty() {
            drop(state);
            if waited.as_deref() != Some(STANDS_BY) {
                tracing::info!(cluster = %self.name, controller, "member answers again: its leave goes on");
            }
            self.readiness
                .member_phase(&self.name, Some(Phase::Leaving(None)));
        }
    }

    /// `controller` gave up waiting: the member's children there are left behind, as `reason` says.
    pub(crate) fn abandon(&self, controller: &str, reason: String) {
        let mut state = self.lock();
        state.waits.remove(controller);
        state.abandoned.get_or_insert(reason);
    }

    /// What the leave waits for now, if it waits.
    pub(crate) fn waiting_for(&self) -> Option<String> {
        self.lock().waits.values().next().cloned()
    }

    /// Why the children were abandoned, if they were.
    pub(crate) fn abandoned(&self) -> Option<String> {
        self.lock().abandoned.clone()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, LeaveState> {
        self.state.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readiness::MemberPhase;

    fn progress(readiness: &Arc<Readiness>) -> LeaveProgress {
        readiness.arm();
        readiness.declare("m", false);
        LeaveProgress::new("m", Slot::default(), None, readiness.clone())
    }

    fn shown(readiness: &Readiness) -> (MemberPhase, Option<String>) {
        let member = readiness.report().clusters["m"].member.clone().unwrap();
        (member.phase, member.waiting_for)
    }

    #[test]
    fn a_standby_shows_that_the_leader_deletes_the_children_and_a_refusal_shows_its_reason() {
        let readiness = Arc::new(Readiness::default());
        let progress = progress(&readiness);

        progress.waits_for_the_leader("c");
        assert_eq!(progress.waiting_for().as_deref(), Some(STANDS_BY));
        let (phase, why) = shown(&readiness);
        assert_eq!(phase, MemberPhase::Leaving);
        assert!(why.unwrap().ends_with(STANDS_BY));

        // Leading, its own delete is refused: the refusal replaces the standby's reason.
        let refused = "deleting ConfigMap x failed: forbidden (403 Forbidden)".to_owned();
        progress.waits("c", refused.clone());
        assert_eq!(progress.waiting_for(), Some(refused.clone()));
        let (_, why) = shown(&readiness);
        assert!(why.unwrap().ends_with(&refused));

        progress.answered("c");
        assert_eq!(progress.waiting_for(), None);
        assert_eq!(shown(&readiness), (MemberPhase::Leaving, None));
        assert_eq!(progress.abandoned(), None);
    }
}
