//! Where each member of the fleet stands: joining, ready or leaving, and what it waits for; `/readyz`
//! shows it beside the member's health.

use parking_lot::Mutex;
use std::collections::BTreeMap;

use super::report::{ContextReport, ContextStatus, MemberPhase, MemberReport, capped};

/// A member's phase as the manager sets it; `Ready` is read from its health.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A change of it waits for its turn: the text says for what.
    Queued(String),
    /// Joined: ready once its watches have listed.
    Joining,
    /// Leaving; what it waits for, when it waits.
    Leaving(Option<String>),
}

/// Every member's phase.
#[derive(Default)]
pub(super) struct MemberPhases(Mutex<BTreeMap<String, Phase>>);

impl MemberPhases {
    /// Member `name` is now in `phase`; `None`: it is no member any more.
    pub(super) fn set(&self, name: &str, phase: Option<Phase>) {
        let mut phases = self.0.lock();
        match phase {
            Some(phase) => phases.insert(name.to_owned(), phase),
            None => phases.remove(name),
        };
    }

    /// Member `name`'s phase.
    pub(super) fn get(&self, name: &str) -> Option<Phase> {
        self.0.lock().get(name).cloned()
    }

    /// Adds each member's phase to its report.
    pub(super) fn annotate(&self, contexts: &mut BTreeMap<String, ContextReport>) {
        for (name, report) in contexts.iter_mut() {
            report.member = self.report(name, report);
        }
    }

    /// What `/readyz` shows of member `name`, its health being `report`.
    fn report(&self, name: &str, report: &ContextReport) -> Option<MemberReport> {
        let phases = self.0.lock();
        let (phase, waiting_for) = match phases.get(name)? {
            Phase::Queued(why) => (MemberPhase::Joining, Some(why.clone())),
            Phase::Joining if report.status == ContextStatus::Ready => (MemberPhase::Ready, None),
            Phase::Joining => {
                let why = report.reasons.first().cloned();
                (
                    MemberPhase::Joining,
                    why.or_else(|| Some("its watches to list".to_owned())),
                )
            }
            Phase::Leaving(why) => (MemberPhase::Leaving, why.clone()),
        };
        let waiting_for = waiting_for.map(capped);
        Some(MemberReport { phase, waiting_for })
    }
}

#[cfg(test)]
mod tests;
