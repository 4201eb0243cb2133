//! The status kubeplex writes: transition times, the `Applied` and `Ready` conditions, and the schema it
//! declares.

use super::*;

fn outcome(state: ClusterState, message: Option<&str>) -> ClusterOutcome {
    ClusterOutcome {
        fenced: None,
        state,
        children: 2,
        message: message.map(str::to_owned),
    }
}

/// The time `seconds` after the epoch.
fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

fn outcomes(entries: &[(&str, ClusterState, Option<&str>)]) -> BTreeMap<String, ClusterOutcome> {
    (entries.iter())
        .map(|&(context, state, message)| (context.to_owned(), outcome(state, message)))
        .collect()
}

#[test]
fn transition_times_move_only_when_the_state_changes() {
    let unreachable = Some("connection refused");
    let outcomes_1 = outcomes(&[
        ("cluster-a", ClusterState::Applied, None),
        ("cluster-b", ClusterState::Unreachable, unreachable),
    ]);
    let first = FleetStatus::from_outcomes(
        &FleetStatus::default(),
        &outcomes_1,
        &BTreeMap::new(),
        Some(1),
        &at(1),
    );
    assert_eq!(first.conditions[0].status, "False");
    assert_eq!(first.conditions[0].reason, "ClustersNotApplied");
    assert!(
        first.conditions[0]
            .message
            .contains("cluster-b: Unreachable (connection refused)")
    );

    let outcomes_2 = outcomes(&[
        ("cluster-a", ClusterState::Applied, None),
        ("cluster-b", ClusterState::Applied, None),
    ]);
    let second = FleetStatus::from_outcomes(&first, &outcomes_2, &BTreeMap::new(), Some(1), &at(2));
    assert_eq!(second.clusters["cluster-a"].last_transition_time, at(1));
    assert_eq!(second.clusters["cluster-b"].last_transition_time, at(2));
    assert_eq!(
        (
            second.conditions[0].status.as_str(),
            &second.conditions[0].last_transition_time
        ),
        ("True", &at(2))
    );
    // Nothing changed: the same status, so the runtime writes nothing.
    let third = FleetStatus::from_outcomes(&second, &outcomes_2, &BTreeMap::new(), Some(1), &at(3));
    assert_eq!(third, second);
}

#[test]
fn a_status_read_back_equals_the_one_written() {
    let outcomes = outcomes(&[("cluster-a", ClusterState::Failed, Some("forbidden"))]);
    let written = FleetStatus::from_outcomes(
        &FleetStatus::default(),
        &outcomes,
        &BTreeMap::new(),
        Some(3),
        &now(),
    );
    let json = serde_json::to_value(&written).unwrap();
    let time = json["conditions"][0]["lastTransitionTime"]
        .as_str()
        .unwrap();
    assert!(
        time.ends_with('Z') && time.len() == "2026-01-01T00:00:00Z".len(),
        "{time}"
    );
    assert_eq!(FleetStatus::owned_part(Some(&json)), written);
    // The next reconcile over what the cache shows computes the same status: no second write.
    let again = FleetStatus::from_outcomes(&written, &outcomes, &BTreeMap::new(), Some(3), &now());
    assert_eq!(again, written);
}

#[test]
fn a_failed_reconcile_turns_ready_false_and_keeps_the_clusters() {
    let outcomes = outcomes(&[("cluster-a", ClusterState::Applied, None)]);
    let ready = FleetStatus::from_outcomes(
        &FleetStatus::default(),
        &outcomes,
        &BTreeMap::new(),
        Some(1),
        &at(1),
    );
    let failed = FleetStatus::reconcile_failed(&ready, "image is empty", Some(2), &at(2));
    assert_eq!(failed.clusters, ready.clusters);
    let condition = &failed.conditions[0];
    assert_eq!(
        (
            condition.status.as_str(),
            condition.reason.as_str(),
            condition.message.as_str()
        ),
        ("False", "ReconcileFailed", "image is empty")
    );
    assert_eq!(
        (
            &condition.last_transition_time,
            condition.observed_generation
        ),
        (&at(2), Some(2))
    );
}

#[test]
fn a_message_the_api_server_would_refuse_is_cut() {
    let long = "é".repeat(MAX_MESSAGE);
    let failed = FleetStatus::reconcile_failed(&FleetStatus::default(), &long, None, &at(1));
    let message = &failed.conditions[0].message;
    assert!(message.len() <= MAX_MESSAGE && message.ends_with("..."));
}

#[test]
fn only_kubeplexs_own_condition_is_compared_and_rewritten() {
    let status = serde_json::json!({
        "clusters": {},
        "conditions": [
            // Another writer's, with a time that does not parse: not kubeplex's to read.
            { "type": "Configured", "status": "True", "reason": "Mine", "lastTransitionTime": "t0" },
            {
                "type": "Ready", "status": "True", "reason": "AllClustersApplied", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:01Z",
            },
        ],
        "somethingElse": 1,
    });
    let owned = FleetStatus::owned_part(Some(&status));
    assert_eq!(owned.conditions.len(), 1);
    assert_eq!(owned.conditions[0].type_, READY);
    let applied = serde_json::json!({ "conditions": [{
        "type": "Applied", "status": "True", "reason": "AllClustersApplied", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:01Z",
    }] });
    assert_eq!(
        FleetStatus::owned_part(Some(&applied)).conditions[0].type_,
        APPLIED
    );
    assert_eq!(owned.conditions[0].last_transition_time, at(1_767_225_601));
    assert_eq!(FleetStatus::owned_part(None), FleetStatus::default());
}

#[test]
fn the_schema_is_that_of_meta_v1_conditions_keyed_by_type() {
    let schema = serde_json::to_value(schemars::schema_for!(FleetStatus)).unwrap();
    let conditions = &schema["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map", "{conditions}");
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"])
    );
    let condition = &conditions["items"];
    assert_eq!(
        condition["required"],
        serde_json::json!(["type", "status", "lastTransitionTime", "reason", "message"])
    );
    let time = &condition["properties"]["lastTransitionTime"];
    assert_eq!(
        (&time["type"], &time["format"]),
        (&"string".into(), &"date-time".into())
    );
    assert_eq!(condition["properties"]["reason"]["minLength"], 1);
    let cluster = &schema["$defs"]["ClusterStatus"]["properties"]["lastTransitionTime"];
    assert_eq!(cluster["format"], "date-time", "{schema}");
}

#[test]
fn ready_waits_for_every_child_to_be_healthy_applied_does_not() {
    use crate::core::child_health::{Assessment, ChildHealth, Health};
    let child = |health, reason: &str| {
        ChildHealth::without_projection(Some("namespace-b"), "web", Assessment::new(health, reason))
    };
    let outcomes = outcomes(&[
        ("cluster-a", ClusterState::Applied, None),
        ("cluster-b", ClusterState::Applied, None),
    ]);
    let healthy = ClusterHealth::of(&[child(Health::Healthy, "3/3 replicas available")]).unwrap();
    let progressing =
        ClusterHealth::of(&[child(Health::Progressing, "0/3 replicas available")]).unwrap();
    let health: BTreeMap<String, ClusterHealth> = [
        ("cluster-a".to_owned(), healthy.clone()),
        ("cluster-b".to_owned(), progressing),
    ]
    .into();
    let status =
        FleetStatus::from_outcomes(&FleetStatus::default(), &outcomes, &health, Some(1), &at(1));
    let said = |type_: &str| {
        let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.clone(), c.reason.clone(), c.message.clone())
    };
    assert_eq!(said(APPLIED).0, "True");
    assert_eq!(
        said(READY),
        (
            "False".to_owned(),
            "ChildrenNotHealthy".to_owned(),
            "cluster-b: Progressing: 0/1 children healthy (namespace-b/web: 0/3 replicas available)".to_owned()
        )
    );
    assert_eq!(status.clusters["cluster-a"].health.as_ref(), Some(&healthy));
    let healthy_again = || healthy.clone();
    let all_healthy: BTreeMap<String, ClusterHealth> = [
        ("cluster-a".to_owned(), healthy.clone()),
        ("cluster-b".to_owned(), healthy.clone()),
    ]
    .into();
    let status = FleetStatus::from_outcomes(&status, &outcomes, &all_healthy, Some(1), &at(2));
    let ready = status.conditions.iter().find(|c| c.type_ == READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllChildrenHealthy")
    );
    assert_eq!(ready.last_transition_time, at(2));
    let applied = status
        .conditions
        .iter()
        .find(|c| c.type_ == APPLIED)
        .unwrap();
    assert_eq!(
        applied.last_transition_time,
        at(1),
        "Applied did not change"
    );

    // A table's cell: the state, and how many children are in the worst health.
    let cell = |health| ClusterStatus {
        health,
        ..ClusterStatus::new(ClusterState::Applied, 1, at(3))
    };
    assert_eq!(cell(Some(healthy_again())).line(), "Applied, 1 Healthy");
    assert_eq!(cell(None).line(), "Applied");
    let degraded = ClusterHealth::of(&[
        child(Health::Healthy, ""),
        child(
            Health::Degraded,
            "progress deadline exceeded: ReplicaSet \"web\" timed out",
        ),
    ]);
    assert_eq!(
        cell(degraded).line(),
        "Applied, 1 Degraded: namespace-b/web progress deadline exceeded"
    );
    let progressing = ClusterHealth::of(&[child(Health::Progressing, "0/3 replicas available")]);
    assert_eq!(cell(progressing).line(), "Applied, 1 Progressing");

    // A child held on purpose: not ready, and the reason says why.
    let paused = ClusterHealth::of(&[child(Health::Suspended, "rollout paused")]).unwrap();
    assert_eq!(paused.suspended, 1);
    let suspended: BTreeMap<String, ClusterHealth> = [
        ("cluster-a".to_owned(), healthy_again()),
        ("cluster-b".to_owned(), paused),
    ]
    .into();
    let status = FleetStatus::from_outcomes(&status, &outcomes, &suspended, Some(1), &at(3));
    let ready = status.conditions.iter().find(|c| c.type_ == READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ChildrenSuspended")
    );
}

#[test]
fn ready_counts_only_the_clusters_the_children_must_run_in() {
    use crate::core::child_health::{Assessment, ChildHealth, Health};
    let child = |health, reason: &str| {
        ChildHealth::without_projection(Some("namespace-b"), "web", Assessment::new(health, reason))
    };
    let healthy = ClusterHealth::of(&[child(Health::Healthy, "3/3 replicas available")]).unwrap();
    let going = ClusterHealth::of(&[child(Health::Progressing, "0/3 replicas available")]).unwrap();
    let health: BTreeMap<String, ClusterHealth> = [
        ("cluster-a".to_owned(), healthy),
        ("member-b".to_owned(), going.clone()),
        ("member-c".to_owned(), going.clone()),
        ("cluster-d".to_owned(), going),
    ]
    .into();
    // A member leaving (its children being deleted), one that left with its children orphaned, and a
    // cluster the parent does not target: none holds `Ready` back.
    let outcomes = outcomes(&[
        ("cluster-a", ClusterState::Applied, None),
        ("member-b", ClusterState::Leaving, None),
        ("member-c", ClusterState::Left, None),
        ("cluster-d", ClusterState::NotTargeted, None),
    ]);
    let status =
        FleetStatus::from_outcomes(&FleetStatus::default(), &outcomes, &health, Some(1), &at(1));
    let ready = status.conditions.iter().find(|c| c.type_ == READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllChildrenHealthy"),
        "{}",
        ready.message
    );
}
