//! The status draft of one reconcile: kubeplex's part of a parent's status, settled once as each cluster's
//! outcome arrives (the children kept carried, their health judged), and written at most twice.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::controller::OwnStatus;
use crate::core::{ClusterHealth, ClusterOutcome, FleetStatus};
use crate::engine::children::fan_out::not_answering_yet;
use crate::engine::children::health::{Declared, judged};
use crate::engine::children::tally::carry_kept;
use crate::engine::engine::ChildWatch;

/// kubeplex's part of one parent's status, as one reconcile works it out.
pub(crate) struct StatusDraft {
    /// The status as the reconcile found it: what its Events compare with, and what its first write goes
    /// over.
    before: FleetStatus,
    generation: Option<i64>,
    /// Whether `before` was written for the parent's spec as it is now: the children kept are told on.
    same_spec: bool,
    /// The children the reconcile declared, by cluster.
    declared: BTreeMap<String, Vec<Declared>>,
    /// Where the children live: a place not answered yet is told as not answering in the interim write.
    places: Vec<String>,
    /// Each cluster's outcome, settled: the places' as they arrive, over the members left or leaving.
    outcomes: BTreeMap<String, ClusterOutcome>,
    health: BTreeMap<String, ClusterHealth>,
    /// What the last write left in place, for the next one to go over.
    written: Option<FleetStatus>,
    /// The reconcile's own status fields, written with kubeplex's part.
    own: Option<OwnStatus>,
    /// Whether `own` differs from what the parent had (or this controller last wrote) when the reconcile
    /// began, until a write puts it in place.
    own_changed: bool,
}

impl StatusDraft {
    /// A draft over `before` for a parent of `generation` with the `declared` children in `places`.
    pub(crate) fn new(
        before: FleetStatus,
        generation: Option<i64>,
        declared: BTreeMap<String, Vec<Declared>>,
        places: Vec<String>,
    ) -> Self {
        let same_spec = generation.is_some() && before.observed_generation() == generation;
        Self {
            before,
            generation,
            same_spec,
            declared,
            places,
            outcomes: BTreeMap::new(),
            health: BTreeMap::new(),
            written: None,
            own: None,
            own_changed: false,
        }
    }

    /// The reconcile's own status fields go in every write of this draft; `before` is what the parent had
    /// of them when the reconcile began.
    pub(crate) fn with_own(mut self, own: Option<OwnStatus>, before: Option<OwnStatus>) -> Self {
        self.own_changed = own.is_some() && own != before;
        self.own = own;
        self
    }

    /// The reconcile's own status fields, if it set any.
    pub(crate) fn own(&self) -> Option<&OwnStatus> {
        self.own.as_ref()
    }

    /// The reconcile's own status fields while a write still has to put them in place.
    pub(crate) fn own_to_write(&self) -> Option<&OwnStatus> {
        self.own.as_ref().filter(|_| self.own_changed)
    }

    /// The status as the reconcile found it.
    pub(crate) fn before(&self) -> &FleetStatus {
        &self.before
    }

    /// A member left or leaving (its `outcome` says which): recorded unless a place of that name answers.
    pub(crate) fn member(&mut self, name: String, outcome: ClusterOutcome) {
        self.outcomes.entry(name).or_insert(outcome);
    }

    /// Settles the outcome of place `name` as it arrives: the children kept told on while the spec is the
    /// same, and its children's health judged from its `watches`.
    pub(crate) fn settle(
        &mut self,
        name: String,
        mut outcome: ClusterOutcome,
        watches: &[&ChildWatch],
    ) {
        carry_kept(
            self.before.clusters.get(&name),
            self.same_spec,
            &mut outcome,
        );
        let declared = self.declared.get(&name).map_or(&[][..], Vec::as_slice);
        match judged(declared, outcome.state, watches) {
            Some(health) => self.health.insert(name.clone(), health),
            None => self.health.remove(&name),
        };
        self.outcomes.insert(name, outcome);
    }

    /// Each cluster's outcome so far.
    pub(crate) fn outcomes(&self) -> &BTreeMap<String, ClusterOutcome> {
        &self.outcomes
    }

    /// The health of the children in each cluster so far.
    pub(crate) fn health(&self) -> &BTreeMap<String, ClusterHealth> {
        &self.health
    }

    /// Whether a write of the reconcile was refused by this replica's fence: then nothing may be written.
    pub(crate) fn fenced(&self) -> bool {
        self.outcomes.values().any(|o| o.fenced.is_some())
    }

    /// The status to write now (`interim`: the places still working told as not answering yet), and what it
    /// goes over: the reconcile's last write, or the status as the reconcile found it.
    pub(crate) fn status(&self, interim: bool, now: &Time) -> (FleetStatus, &FleetStatus) {
        let previous = self.written.as_ref().unwrap_or(&self.before);
        let status = if interim {
            let (mut outcomes, mut health) = (self.outcomes.clone(), self.health.clone());
            let waiting = self
                .places
                .iter()
                .filter(|p| !self.outcomes.contains_key(*p));
            for place in waiting {
                let outcome = not_answering_yet();
                let declared = self.declared.get(place).map_or(&[][..], Vec::as_slice);
                if let Some(unknown) = judged(declared, outcome.state, &[]) {
                    health.insert(place.clone(), unknown);
                }
                outcomes.insert(place.clone(), outcome);
            }
            FleetStatus::from_outcomes(previous, &outcomes, &health, self.generation, now)
        } else {
            let (outcomes, health) = (&self.outcomes, &self.health);
            FleetStatus::from_outcomes(previous, outcomes, health, self.generation, now)
        };
        (status, previous)
    }

    /// The `status` is in place (written, or as it was): the next write goes over it.
    pub(crate) fn wrote(&mut self, status: FleetStatus) {
        self.written = Some(status);
        self.own_changed = false;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::StatusDraft;
    use crate::core::{ClusterOutcome, ClusterState, FleetStatus};

    fn outcome(state: ClusterState, message: Option<&str>) -> ClusterOutcome {
        ClusterOutcome {
            fenced: None,
            state,
            children: 1,
            message: message.map(str::to_owned),
        }
    }

    /// The status a reconcile of generation 3 wrote: cluster-a told the children it kept.
    fn kept_before(now: &Time) -> FleetStatus {
        let told = outcome(ClusterState::Applied, Some("1 child kept: Namespace blue"));
        let outcomes = BTreeMap::from([("cluster-a".to_owned(), told)]);
        FleetStatus::from_outcomes(
            &FleetStatus::default(),
            &outcomes,
            &BTreeMap::new(),
            Some(3),
            now,
        )
    }

    /// One draft makes both writes: the interim one tells the places still working as not answering yet
    /// beside the members leaving, the final one goes over it; the children kept are carried once, as
    /// cluster-a's outcome arrives, while the spec is the same.
    #[test]
    fn a_draft_is_settled_as_outcomes_arrive_and_gives_the_interim_and_the_final_status() {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let places = vec!["cluster-a".to_owned(), "cluster-b".to_owned()];
        let mut draft = StatusDraft::new(kept_before(&now), Some(3), BTreeMap::new(), places);
        draft.member(
            "member-c".into(),
            outcome(ClusterState::Leaving, Some("leaving")),
        );
        draft.settle(
            "cluster-a".into(),
            outcome(ClusterState::Applied, None),
            &[],
        );
        assert_eq!(
            draft.outcomes()["cluster-a"].message.as_deref(),
            Some("1 child kept: Namespace blue")
        );

        let (interim, previous) = draft.status(true, &now);
        assert_eq!(previous, draft.before());
        let states: Vec<(&str, ClusterState)> = (interim.clusters.iter())
            .map(|(name, c)| (name.as_str(), c.state))
            .collect();
        assert_eq!(
            states,
            [
                ("cluster-a", ClusterState::Applied),
                ("cluster-b", ClusterState::Unreachable),
                ("member-c", ClusterState::Leaving)
            ]
        );
        draft.wrote(interim.clone());

        draft.settle(
            "cluster-b".into(),
            outcome(ClusterState::Applied, None),
            &[],
        );
        let (last, previous) = draft.status(false, &now);
        assert_eq!(
            previous, &interim,
            "the final write goes over the interim one"
        );
        assert_eq!(last.clusters["cluster-b"].state, ClusterState::Applied);
        assert_eq!(last.clusters["cluster-b"].message, None);
        assert_eq!(last.clusters["member-c"].state, ClusterState::Leaving);

        // A new generation: the children kept are no longer told.
        let mut next = StatusDraft::new(kept_before(&now), Some(4), BTreeMap::new(), Vec::new());
        next.settle(
            "cluster-a".into(),
            outcome(ClusterState::Applied, None),
            &[],
        );
        assert_eq!(next.outcomes()["cluster-a"].message, None);
    }
}
