//! The ClusterProfile provider's decisions, from the events a watch gives to the commands it sends.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::*;
use crate::members::provider::{Command, FixedClients, LeavePolicy};

/// What the manager receives.
#[derive(Debug, PartialEq)]
enum Seen {
    Join(String, String),
    Unhealthy(String, String),
    Leave(String),
    Listed,
}

fn profiles() -> (Profiles, mpsc::Receiver<Command>) {
    let (commands, received) = mpsc::channel(16);
    let clients: FixedClients = Arc::new(|_: &str| unreachable!("the state reads no cluster"));
    let sink = MemberSink::new(commands, clients, LeavePolicy::Delete);
    let access = AccessProviders::from_json(
        r#"{"providers": [{"name": "reader", "execConfig": {"command": "/bin/reader"}}]}"#,
    )
    .unwrap();
    let read = ("fleet".to_owned(), access, JoinConditions::default());
    (Profiles::new(read, sink, Version::V1alpha2), received)
}

/// Everything sent so far.
fn seen(received: &mut mpsc::Receiver<Command>) -> Vec<Seen> {
    let mut seen = Vec::new();
    while let Ok(command) = received.try_recv() {
        seen.push(match command {
            Command::Join { name, config } => Seen::Join(name, config.cluster_url.to_string()),
            Command::Unhealthy { name, reason } => Seen::Unhealthy(name, reason),
            Command::Leave { name, .. } => Seen::Leave(name),
            Command::Listed => Seen::Listed,
        });
    }
    seen
}

fn profile(name: &str, healthy: &str, server: &str, property: &str) -> DynamicObject {
    let status: Value = json!({
        "conditions": [{ "type": "ControlPlaneHealthy", "status": healthy }],
        "accessProviders": [{ "name": "reader", "cluster": { "server": server } }],
        "properties": [{ "name": "region", "value": property }],
    });
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": { "name": name, "namespace": "fleet" }, "status": status,
    }))
    .unwrap()
}

#[tokio::test]
async fn a_cluster_profile_joins_when_healthy_stays_when_unhealthy_and_leaves_when_gone() {
    let (mut state, mut received) = profiles();
    let (one, two) = ("https://one.example/", "https://two.example/");
    state.event(Event::Init).await;
    let waiting = profile("c", "Unknown", one, "eu");
    state.event(Event::InitApply(waiting)).await;
    state.event(Event::InitDone).await;
    let why = "ClusterProfile fleet/c: its ControlPlaneHealthy condition is Unknown";
    let unhealthy = Seen::Unhealthy("fleet-c".into(), why.into());
    assert_eq!(seen(&mut received), [unhealthy, Seen::Listed]);

    state
        .event(Event::Apply(profile("c", "True", one, "eu")))
        .await;
    assert_eq!(
        seen(&mut received),
        [Seen::Join("fleet-c".into(), one.into())]
    );
    // A property changed: nothing that reaches the cluster did.
    state
        .event(Event::Apply(profile("c", "True", one, "us")))
        .await;
    assert_eq!(seen(&mut received), []);
    // A new server: it joins again.
    state
        .event(Event::Apply(profile("c", "True", two, "us")))
        .await;
    assert_eq!(
        seen(&mut received),
        [Seen::Join("fleet-c".into(), two.into())]
    );

    // Unhealthy: reported once, no leave; healthy again: joined again, which clears the report.
    state
        .event(Event::Apply(profile("c", "False", two, "us")))
        .await;
    state
        .event(Event::Apply(profile("c", "False", two, "eu")))
        .await;
    let why = "ClusterProfile fleet/c: its ControlPlaneHealthy condition is False";
    assert_eq!(
        seen(&mut received),
        [Seen::Unhealthy("fleet-c".into(), why.into())]
    );
    state
        .event(Event::Apply(profile("c", "True", two, "eu")))
        .await;
    assert_eq!(
        seen(&mut received),
        [Seen::Join("fleet-c".into(), two.into())]
    );

    // A reload (a 401) joins it again, unchanged.
    state.reload("fleet-c").await;
    assert_eq!(
        seen(&mut received),
        [Seen::Join("fleet-c".into(), two.into())]
    );

    // Gone from a relist: it leaves; the manager is told of the first list only once.
    state.event(Event::Init).await;
    state.event(Event::InitDone).await;
    assert_eq!(seen(&mut received), [Seen::Leave("fleet-c".into())]);
    state
        .event(Event::Apply(profile("c", "True", one, "eu")))
        .await;
    state
        .event(Event::Delete(profile("c", "True", one, "eu")))
        .await;
    let expected = [
        Seen::Join("fleet-c".into(), one.into()),
        Seen::Leave("fleet-c".into()),
    ];
    assert_eq!(seen(&mut received), expected);
}

/// `profile` with the inventory member id `id`.
fn of_member(mut object: DynamicObject, id: &str) -> DynamicObject {
    object
        .metadata
        .labels
        .get_or_insert_default()
        .insert(profile::MEMBER_ID_LABEL.to_owned(), id.to_owned());
    object
}

#[tokio::test]
async fn profiles_of_one_inventory_member_join_it_once_and_it_leaves_with_the_last() {
    let (mut state, mut received) = profiles();
    let (one, two) = ("https://one.example/", "https://two.example/");
    let ocm = |healthy| of_member(profile("ocm-c", healthy, one, "eu"), "c");
    let fleet = |healthy| of_member(profile("fleet-c", healthy, two, "eu"), "c");
    state.event(Event::Init).await;
    state.event(Event::InitApply(ocm("True"))).await;
    state.event(Event::InitApply(fleet("True"))).await;
    state.event(Event::InitDone).await;
    // One member, named after the id, joined once through the first profile.
    let joined_one = Seen::Join("fleet-c".into(), one.into());
    assert_eq!(seen(&mut received), [joined_one, Seen::Listed]);

    // The profile it joined with turns unhealthy: it carries on through the other.
    state.event(Event::Apply(ocm("False"))).await;
    let joined_two = Seen::Join("fleet-c".into(), two.into());
    assert_eq!(seen(&mut received), [joined_two]);
    // Healthy again: it stays with the one it joined with.
    state.event(Event::Apply(ocm("True"))).await;
    assert_eq!(seen(&mut received), []);

    // A profile of its name without the label is another member's name: ignored until the member leaves.
    let alone = profile("c", "True", one, "eu");
    state.event(Event::Apply(alone.clone())).await;
    assert_eq!(seen(&mut received), []);

    // One profile gone: still a member; the last gone: it leaves, and the ignored profile takes the name.
    state.event(Event::Delete(fleet("True"))).await;
    let joined_one = Seen::Join("fleet-c".into(), one.into());
    assert_eq!(seen(&mut received), [joined_one]);
    state.event(Event::Delete(ocm("True"))).await;
    let expected = [
        Seen::Leave("fleet-c".into()),
        Seen::Join("fleet-c".into(), one.into()),
    ];
    assert_eq!(seen(&mut received), expected);

    // A profile whose label changes leaves the member it gave and gives another.
    state.event(Event::Apply(of_member(alone, "d"))).await;
    let expected = [
        Seen::Leave("fleet-c".into()),
        Seen::Join("fleet-d".into(), one.into()),
    ];
    assert_eq!(seen(&mut received), expected);
}
