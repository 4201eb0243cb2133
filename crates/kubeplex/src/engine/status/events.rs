//! Kubernetes Events on parents, published in the parent's own cluster, and which changes of a parent's
//! per-cluster state deserve one.
//!
//! kube's `Recorder` turns repeats of an event into one series (one Event object whose count grows). It
//! keys a repeat by reason and action, not by note, so two events of one reason — about different
//! clusters, or one child degraded for another cause — would become one series showing the first one's
//! note: each (cluster, subject, note) has a recorder of its own, so a repeat is the same words (as
//! client-go's correlator has it) and new words are a new Event. Events about a parent's
//! clusters are published when the state changes, compared with the status written before, never per
//! retry.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use parking_lot::Mutex;
use tokio::sync::Semaphore;
// tokio's clock, so paused-time tests drive the expiry.
use tokio::time::Instant;

use crate::core::{ClusterHealth, ClusterOutcome, ClusterState, FleetStatus, Health};
use crate::core::{Shrink, chain};

/// What an event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) warning: bool,
    /// `PascalCase`, e.g. `ChildConflict`.
    pub(crate) reason: &'static str,
    /// What the controller was doing, e.g. `Apply`.
    pub(crate) action: &'static str,
    pub(crate) message: String,
    /// What the event is about (a cluster, a member, a set of children), whose recorders go when it does
    /// ([`EventPublisher::forget`]); `None`: about the parent alone.
    pub(crate) about: Option<String>,
    /// An event of its own, its message naming what it is about (children created in a cluster): no
    /// repeat of it is expected, so no recorder is kept for it.
    pub(crate) alone: bool,
}

impl Note {
    pub(crate) fn warning(reason: &'static str, action: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            action,
            message,
            about: None,
            alone: false,
        }
    }

    pub(crate) fn normal(reason: &'static str, action: &'static str, message: String) -> Self {
        Self {
            warning: false,
            ..Self::warning(reason, action, message)
        }
    }

    /// The same event, about `subject`.
    pub(crate) fn about(self, subject: impl Into<String>) -> Self {
        Self {
            about: Some(subject.into()),
            ..self
        }
    }

    /// The same event, of its own: see [`Note::alone`](Note#structfield.alone).
    pub(crate) fn alone(self) -> Self {
        Self {
            about: None,
            alone: true,
            ..self
        }
    }
}

/// Publishes a controller's events, one recorder per (cluster, subject, note).
pub(crate) struct EventPublisher {
    controller: String,
    recorders: Mutex<HashMap<Series, (Recorder, Instant)>>,
    /// Events being sent now: at most [`EVENTS_AT_ONCE`].
    at_once: Semaphore,
}

/// How many events a controller sends at once. Each takes a connection of the parent's cluster for its
/// request: a member change that gives every parent an event about every member would otherwise open a
/// connection per event, all left idle in the pool after the burst.
const EVENTS_AT_ONCE: usize = 4;

/// The cluster an event is published in, what it is about, and its note.
type Series = (String, Option<String>, String);

/// The longest note the API server accepts.
const MAX_NOTE: usize = 1024;

/// How long a recorder is kept unused: longer than the `Recorder`'s own memory of an event (6 minutes),
/// after which a repeat starts a new Event object anyway.
const RECORDER_IDLE: Duration = Duration::from_secs(10 * 60);

impl EventPublisher {
    pub(crate) fn new(controller: &str) -> Self {
        Self {
            controller: controller.to_owned(),
            recorders: Mutex::default(),
            at_once: Semaphore::new(EVENTS_AT_ONCE),
        }
    }

    /// Drops the recorders of events about `subject` (a member that left): nothing repeats them now.
    pub(crate) fn forget(&self, subject: &str) {
        let mut recorders = self.recorders.lock();
        recorders.retain(|(_, about, _), _| about.as_deref() != Some(subject));
        recorders.shrink_when_sparse();
    }

    /// Whether a recorder is kept for events in `context` about `subject`.
    #[cfg(test)]
    pub(crate) fn keeps(&self, context: &str, subject: Option<&str>) -> bool {
        let recorders = self.recorders.lock();
        (recorders.keys()).any(|(c, about, _)| c == context && about.as_deref() == subject)
    }

    /// Publishes `note` about `object` in `context`; a failure to publish is logged, never an error.
    pub(crate) async fn publish(
        &self,
        context: &str,
        client: Client,
        object: &ObjectReference,
        note: Note,
    ) {
        let reporter = || Reporter {
            controller: self.controller.clone(),
            instance: None,
        };
        let recorder = if note.alone {
            // Its memory of the event would only be kept for a repeat that does not come.
            Recorder::new(client, reporter())
        } else {
            let mut recorders = self.recorders.lock();
            let now = Instant::now();
            recorders.retain(|_, (_, used)| now.duration_since(*used) < RECORDER_IDLE);
            recorders.shrink_when_sparse();
            let series = (context.to_owned(), note.about.clone(), note.message.clone());
            let (recorder, used) = recorders
                .entry(series)
                .or_insert_with(|| (Recorder::new(client, reporter()), now));
            *used = now;
            recorder.clone()
        };
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.into(),
            note: Some(note.message.chars().take(MAX_NOTE).collect()),
            action: note.action.into(),
            secondary: None,
        };
        // Never closed: a permit always comes.
        let _sending = self.at_once.acquire().await;
        if let Err(error) = recorder.publish(&event, object).await {
            tracing::warn!(cluster = %context, reason = note.reason, error = %chain(&error), "publishing an event failed");
        }
    }
}

/// The events a reconcile's outcomes call for, compared with the status before it (`previous`): a child
/// cluster that became unreachable (`ClusterUnreachable`) or answers again (`ClusterReachable`), and a
/// child name newly taken by someone else (`ChildConflict`), and a cluster whose apply failed
/// (`ChildApplyFailed`, again only when its message changes). A state that stays is not told again.
pub(crate) fn context_notes(
    previous: &FleetStatus,
    outcomes: &BTreeMap<String, ClusterOutcome>,
) -> Vec<Note> {
    let mut notes = Vec::new();
    for (context, outcome) in outcomes {
        let before = previous.clusters.get(context);
        let was = |state| before.is_some_and(|b| b.state == state);
        let message = outcome.message.clone().unwrap_or_default();
        match outcome.state {
            ClusterState::Unreachable if !was(ClusterState::Unreachable) => notes.push(
                Note::warning(
                    "ClusterUnreachable",
                    "Apply",
                    format!(
                        "{context} cannot be reached: its children are as they were ({message})"
                    ),
                )
                .about(context),
            ),
            ClusterState::Unreachable => {}
            _ if was(ClusterState::Unreachable) => notes.push(
                Note::normal(
                    "ClusterReachable",
                    "Apply",
                    format!("{context} answers again"),
                )
                .about(context),
            ),
            _ => {}
        }
        let same_conflict = was(ClusterState::Conflict)
            && before.and_then(|b| b.message.as_ref()) == Some(&message);
        if outcome.state == ClusterState::Conflict && !same_conflict {
            let message = format!("{context}: {message}");
            notes.push(Note::warning("ChildConflict", "Apply", message).alone());
        }
        let same_failure =
            was(ClusterState::Failed) && before.and_then(|b| b.message.as_ref()) == Some(&message);
        if outcome.state == ClusterState::Failed && !same_failure {
            let text = format!("applying the children in {context} failed: {message}");
            notes.push(Note::warning("ChildApplyFailed", "Apply", text).about(context));
        }
    }
    notes
}

/// The events the children's health calls for, compared with the status before (`previous`): a cluster
/// whose worst child became `Degraded`, or another child than before is (`ChildDegraded`, naming the
/// cluster and the child), and one whose degraded child is healthy or progressing again
/// (`ChildRecovered`). A cluster unreachable now is not told as recovered.
pub(crate) fn health_notes(
    previous: &FleetStatus,
    health: &BTreeMap<String, ClusterHealth>,
) -> Vec<Note> {
    let mut notes = Vec::new();
    for (context, now) in health {
        let before = (previous.clusters.get(context)).and_then(|c| c.health.as_ref());
        let was_degraded = before.filter(|b| b.state == Health::Degraded);
        let (child, why) = worst_child(now);
        match (now.state, was_degraded) {
            (Health::Degraded, Some(was)) if was.worst == now.worst => {}
            (Health::Degraded, _) => {
                let text = format!("{context}: child {child} is Degraded: {why}");
                notes.push(Note::warning("ChildDegraded", "Health", text).about(context));
            }
            (Health::Healthy | Health::Progressing, Some(was)) => {
                let (child, _) = worst_child(was);
                let text = format!(
                    "{context}: child {child} is no longer Degraded ({})",
                    now.summary()
                );
                notes.push(Note::normal("ChildRecovered", "Health", text).about(context));
            }
            _ => {}
        }
    }
    notes
}

/// The worst child's name and reason, from a summary's `worst` (`namespace-b/web: 0/3 replicas available`).
fn worst_child(health: &ClusterHealth) -> (&str, &str) {
    let worst = health.worst.as_deref().unwrap_or_default();
    worst.split_once(": ").unwrap_or((worst, ""))
}

/// The event a deletion's outcomes call for, compared with the status before (`previous`): the deletion
/// became blocked by clusters it cannot clean up (`DeletionBlocked`, naming them), or it was blocked and is
/// no longer (`DeletionUnblocked`). Nothing while it stays blocked.
pub(crate) fn deletion_note(
    previous: &FleetStatus,
    outcomes: &BTreeMap<String, ClusterOutcome>,
) -> Option<Note> {
    let was_blocked = previous
        .clusters
        .values()
        .any(|c| c.state == ClusterState::Deleting);
    let blocking: Vec<(&String, &ClusterOutcome)> = outcomes
        .iter()
        .filter(|(_, o)| o.state == ClusterState::Deleting)
        .collect();
    match (was_blocked, blocking.is_empty()) {
        (false, false) => {
            let names: Vec<&str> = blocking.iter().map(|(name, _)| name.as_str()).collect();
            let waits: Vec<String> = blocking
                .iter()
                .map(|(name, o)| format!("{name} ({})", o.message.as_deref().unwrap_or_default()))
                .collect();
            let message = format!(
                "deletion waits for children that cannot be removed yet in {}",
                waits.join("; ")
            );
            Some(Note::warning("DeletionBlocked", "Delete", message).about(names.join(",")))
        }
        (true, true) => Some(Note::normal(
            "DeletionUnblocked",
            "Delete",
            "every cluster is cleaned up or given up: the deletion proceeds".into(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
