//! Where each member of the fleet stands: joining, ready or leaving, and what it waits for; `/readyz`
//! shows it beside the member's readiness.

use parking_lot::Mutex;
use std::collections::BTreeMap;

use super::report::{ClusterReadiness, ClusterReport, MemberPhase, MemberReport, capped};

/// A member's phase as the manager sets it; `Ready` is read from its readiness.
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
    pub(super) fn annotate(&self, contexts: &mut BTreeMap<String, ClusterReport>) {
        for (name, report) in contexts.iter_mut() {
            report.member = self.report(name, report);
        }
    }

    /// What `/readyz` shows of member `name`, its readiness being `report`.
    fn report(&self, name: &str, report: &ClusterReport) -> Option<MemberReport> {
        let phases = self.0.lock();
        let (phase, waiting_for) = match phases.get(name)? {
            Phase::Queued(why) => (MemberPhase::Joining, Some(why.clone())),
            Phase::Joining if report.status == ClusterReadiness::Ready => {
                (MemberPhase::Ready, None)
            }
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
mod tests {
    use super::*;
    use crate::readiness::MemberPhase;
    use crate::readiness::Readiness;

    #[test]
    fn a_member_shows_joining_ready_and_leaving_with_what_it_waits_for() {
        let readiness = Readiness::default();
        readiness.arm();
        readiness.declare("m", false);
        let phase = |readiness: &Readiness| readiness.report().clusters["m"].member.clone();
        assert_eq!(
            phase(&readiness),
            None,
            "no member phase for a context that is none"
        );

        readiness.member_phase("m", Some(Phase::Queued("a free slot".into())));
        let report = phase(&readiness).unwrap();
        assert_eq!(
            (report.phase, report.waiting_for.as_deref()),
            (MemberPhase::Joining, Some("a free slot"))
        );

        // Joined: joining until its client is connected and its watches have listed, then ready.
        readiness.member_phase("m", Some(Phase::Joining));
        let report = phase(&readiness).unwrap();
        assert_eq!(report.phase, MemberPhase::Joining);
        assert!(report.waiting_for.is_some());
        readiness.connected("m", None);
        let report = phase(&readiness).unwrap();
        assert_eq!(
            (report.phase, report.waiting_for),
            (MemberPhase::Ready, None)
        );

        let why = "its children to be deleted, tried again until the member answers and allows it: context m: unreachable"
        .to_owned();
        readiness.member_phase("m", Some(Phase::Leaving(Some(why.clone()))));
        let report = phase(&readiness).unwrap();
        assert_eq!(
            (report.phase, report.waiting_for),
            (MemberPhase::Leaving, Some(why))
        );
        let body = serde_json::to_value(readiness.report()).unwrap();
        assert_eq!(
            body["clusters"]["m"]["member"]["phase"], "leaving",
            "{body:#}"
        );

        readiness.member_phase("m", None);
        assert_eq!(phase(&readiness), None);
    }
}
