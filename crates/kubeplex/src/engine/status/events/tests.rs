//! Which changes of a parent's per-cluster state are told as events, and which are not.

use super::*;
use crate::core::ClusterStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

fn outcome(state: ClusterState, message: Option<&str>) -> ClusterOutcome {
    ClusterOutcome {
        fenced: None,
        state,
        children: 0,
        message: message.map(str::to_owned),
    }
}

fn outcomes(entries: &[(&str, ClusterState, Option<&str>)]) -> BTreeMap<String, ClusterOutcome> {
    entries
        .iter()
        .map(|(context, state, message)| ((*context).to_owned(), outcome(*state, *message)))
        .collect()
}

/// The status a reconcile with these outcomes wrote.
fn status(entries: &[(&str, ClusterState, Option<&str>)]) -> FleetStatus {
    let clusters = entries
        .iter()
        .map(|(context, state, message)| {
            let status = ClusterStatus {
                state: *state,
                children: 0,
                message: message.map(str::to_owned),
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
                health: None,
                identity: None,
            };
            ((*context).to_owned(), status)
        })
        .collect();
    FleetStatus {
        clusters,
        conditions: Vec::new(),
    }
}

fn reasons(notes: &[Note]) -> Vec<&str> {
    notes.iter().map(|n| n.reason).collect()
}

const DOWN: Option<&str> = Some("unreachable: connection refused");

#[test]
fn a_cluster_becoming_unreachable_is_told_once_and_its_return_once() {
    use ClusterState::{Applied, Unreachable};
    let now_down = outcomes(&[
        ("cluster-a", Applied, None),
        ("cluster-b", Unreachable, DOWN),
    ]);
    let notes = context_notes(&FleetStatus::default(), &now_down);
    assert_eq!(reasons(&notes), ["ClusterUnreachable"]);
    assert!(notes[0].warning);
    assert_eq!(notes[0].about.as_deref(), Some("cluster-b"));
    assert!(
        notes[0].message.starts_with("cluster-b cannot be reached")
            && notes[0].message.contains("connection refused"),
        "{}",
        notes[0].message
    );

    // Retried while it stays down (even with another reason): nothing.
    let written = status(&[
        ("cluster-a", Applied, None),
        ("cluster-b", Unreachable, DOWN),
    ]);
    let timed_out = outcomes(&[
        ("cluster-a", Applied, None),
        ("cluster-b", Unreachable, Some("no answer within 15s")),
    ]);
    assert!(context_notes(&written, &timed_out).is_empty());

    let back = outcomes(&[("cluster-a", Applied, None), ("cluster-b", Applied, None)]);
    let notes = context_notes(&written, &back);
    assert_eq!(reasons(&notes), ["ClusterReachable"]);
    assert!(!notes[0].warning);

    let steady = status(&[("cluster-a", Applied, None), ("cluster-b", Applied, None)]);
    assert!(context_notes(&steady, &back).is_empty());
}

#[test]
fn two_clusters_down_are_two_events_about_different_clusters() {
    use ClusterState::Unreachable;
    let both = outcomes(&[
        ("cluster-a", Unreachable, Some("a: refused")),
        ("cluster-b", Unreachable, Some("b: refused")),
    ]);
    let notes = context_notes(&FleetStatus::default(), &both);
    let about: Vec<_> = notes.iter().map(|n| n.about.as_deref()).collect();
    assert_eq!(about, [Some("cluster-a"), Some("cluster-b")]);
}

#[test]
fn a_conflict_is_told_when_it_appears_or_changes() {
    use ClusterState::{Applied, Conflict};
    let taken = Some("Deployment ns/web already exists and belongs to x");
    let now = outcomes(&[("cluster-a", Conflict, taken)]);
    assert_eq!(
        reasons(&context_notes(
            &status(&[("cluster-a", Applied, None)]),
            &now
        )),
        ["ChildConflict"]
    );
    assert!(context_notes(&status(&[("cluster-a", Conflict, taken)]), &now).is_empty());
    let other = outcomes(&[("cluster-a", Conflict, Some("another name is taken"))]);
    assert_eq!(
        reasons(&context_notes(
            &status(&[("cluster-a", Conflict, taken)]),
            &other
        )),
        ["ChildConflict"]
    );
}

#[test]
fn a_failed_apply_is_told_once_per_message_about_its_cluster() {
    use ClusterState::{Applied, Failed};
    let refused = Some("cannot patch deployments in namespace-a (403 Forbidden)");
    let now = outcomes(&[("cluster-a", Failed, refused), ("cluster-b", Applied, None)]);
    let notes = context_notes(&status(&[("cluster-a", Applied, None)]), &now);
    assert_eq!(reasons(&notes), ["ChildApplyFailed"]);
    assert_eq!(notes[0].about.as_deref(), Some("cluster-a"));
    assert!(notes[0].message.contains("cluster-a") && notes[0].message.contains("403 Forbidden"));
    // Stuck at the same failure: nothing more; a different failure is told.
    assert!(context_notes(&status(&[("cluster-a", Failed, refused)]), &now).is_empty());
    let other = outcomes(&[("cluster-a", Failed, Some("admission webhook denied it"))]);
    let notes = context_notes(&status(&[("cluster-a", Failed, refused)]), &other);
    assert_eq!(reasons(&notes), ["ChildApplyFailed"]);
}

#[test]
fn a_deletion_is_told_blocked_once_and_unblocked_once() {
    use ClusterState::{Abandoned, Deleted, Deleting};
    let why = Some("listing configmaps: unreachable: connection refused");
    let blocked = outcomes(&[("cluster-a", Deleted, None), ("cluster-b", Deleting, why)]);
    let note = deletion_note(&FleetStatus::default(), &blocked).expect("blocked");
    assert_eq!((note.reason, note.warning), ("DeletionBlocked", true));
    assert_eq!(
        note.message,
        "deletion waits for children that cannot be removed yet in cluster-b (listing configmaps: unreachable: connection refused)"
    );

    let written = status(&[("cluster-a", Deleted, None), ("cluster-b", Deleting, why)]);
    assert_eq!(
        deletion_note(&written, &blocked),
        None,
        "still blocked: a retry"
    );

    for done in [
        outcomes(&[("cluster-a", Deleted, None), ("cluster-b", Deleted, None)]),
        outcomes(&[("cluster-a", Deleted, None), ("cluster-b", Abandoned, None)]),
    ] {
        let note = deletion_note(&written, &done).expect("unblocked");
        assert_eq!((note.reason, note.warning), ("DeletionUnblocked", false));
    }
    let clean = outcomes(&[("cluster-a", Deleted, None), ("cluster-b", Deleted, None)]);
    assert_eq!(
        deletion_note(&FleetStatus::default(), &clean),
        None,
        "never blocked"
    );
}

/// cluster-a's health: its one child `apps/web` in `health` for `reason`.
fn health_of(health: Health, reason: &str) -> BTreeMap<String, ClusterHealth> {
    use crate::core::{Assessment, ChildHealth};
    let child =
        ChildHealth::without_projection(Some("apps"), "web", Assessment::new(health, reason));
    [("cluster-a".to_owned(), ClusterHealth::of(&[child]).unwrap())].into()
}

/// The status after a reconcile that found `health`.
fn with_health(health: &BTreeMap<String, ClusterHealth>) -> FleetStatus {
    let mut before = status(&[("cluster-a", ClusterState::Applied, None)]);
    for (context, health) in health {
        before.clusters.get_mut(context).unwrap().health = Some(health.clone());
    }
    before
}

#[test]
fn a_child_becoming_degraded_is_told_once_naming_cluster_and_child_and_its_recovery_once() {
    let degraded = health_of(Health::Degraded, "failed: BackoffLimitExceeded");
    let notes = health_notes(
        &with_health(&health_of(Health::Progressing, "running")),
        &degraded,
    );
    assert_eq!(reasons(&notes), ["ChildDegraded"]);
    assert_eq!(
        notes[0].message,
        "cluster-a: child apps/web is Degraded: failed: BackoffLimitExceeded"
    );
    assert!(notes[0].warning);
    assert!(
        health_notes(&with_health(&degraded), &degraded).is_empty(),
        "told once"
    );
    let unknown = health_of(Health::Unknown, "the cluster is unreachable");
    assert!(
        health_notes(&with_health(&degraded), &unknown).is_empty(),
        "unknown is no recovery"
    );
    let healthy = health_of(Health::Healthy, "1/1 replicas available");
    let notes = health_notes(&with_health(&degraded), &healthy);
    assert_eq!(reasons(&notes), ["ChildRecovered"]);
    assert_eq!(
        notes[0].message,
        "cluster-a: child apps/web is no longer Degraded (Healthy: 1/1 children healthy)"
    );
    assert!(health_notes(&with_health(&healthy), &healthy).is_empty());
}

mod sending;
