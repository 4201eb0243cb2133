//! The status draft of one reconcile: kubeplex's part of a parent's status, settled once as each context's
//! outcome arrives (the children kept carried, their health judged), and written at most twice.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::core::{ClusterHealth, ContextOutcome, FleetStatus};
use crate::engine::children::health::{Declared, judged};
use crate::engine::children::tally::carry_kept;
use crate::engine::engine::ChildWatch;
use crate::engine::fan_out::not_answering_yet;

/// kubeplex's part of one parent's status, as one reconcile works it out.
pub(crate) struct StatusDraft {
    /// The status as the reconcile found it: what its Events compare with, and what its first write goes
    /// over.
    before: FleetStatus,
    generation: Option<i64>,
    /// Whether `before` was written for the parent's spec as it is now: the children kept are told on.
    same_spec: bool,
    /// The children the reconcile declared, by context.
    declared: BTreeMap<String, Vec<Declared>>,
    /// Where the children live: a place not answered yet is told as not answering in the interim write.
    places: Vec<String>,
    /// Each context's outcome, settled: the places' as they arrive, over the members left or leaving.
    outcomes: BTreeMap<String, ContextOutcome>,
    health: BTreeMap<String, ClusterHealth>,
    /// What the last write left in place, for the next one to go over.
    written: Option<FleetStatus>,
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
        }
    }

    /// The status as the reconcile found it.
    pub(crate) fn before(&self) -> &FleetStatus {
        &self.before
    }

    /// A member left or leaving (its `outcome` says which): recorded unless a place of that name answers.
    pub(crate) fn member(&mut self, name: String, outcome: ContextOutcome) {
        self.outcomes.entry(name).or_insert(outcome);
    }

    /// Settles the outcome of place `name` as it arrives: the children kept told on while the spec is the
    /// same, and its children's health judged from its `watches`.
    pub(crate) fn settle(
        &mut self,
        name: String,
        mut outcome: ContextOutcome,
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

    /// Each context's outcome so far.
    pub(crate) fn outcomes(&self) -> &BTreeMap<String, ContextOutcome> {
        &self.outcomes
    }

    /// The health of the children in each context so far.
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
    }
}
