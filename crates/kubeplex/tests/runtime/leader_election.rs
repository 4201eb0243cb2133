//! Leader election on real API servers, two replicas in one process: one leads and reconciles, the other
//! stands by (ready, saying who leads) and reconciles nothing; when the leader shuts down it gives the Lease
//! up and the standby reconciles at once; a Lease a stranger holds with a huge duration is taken over after
//! this replica's own lease duration.
//! (Replicas as processes, frozen and killed, are tested in the example: examples/fleet/tests/ha.rs.)

use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    Fleet, Recorder, WAIT, create_namespace, probe, put_config_map, wait_started,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kubeplex::prelude::*;
use kubeplex::{Manager, ha::LeaderElection};
use kubeplex_testenv::{TestEnv, eventually};

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

const NAMESPACE: &str = "elected";

#[controller(crd = ConfigMap, contexts = [Fleet::Control], namespaces = ["elected"])]
#[derive(Clone, Default)]
struct Elected {
    seen: Recorder,
}

impl Reconcile for Elected {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        self.seen.record(cx.cluster(), &object);
        Ok(Action::await_change())
    }
}

fn election(identity: &str) -> LeaderElection {
    // They keep the fencing order (retry < renew deadline < lease).
    LeaderElection::new(Fleet::Control, NAMESPACE, "elected")
        .with_identity(identity)
        .lease_duration(LEASE)
        .renew_deadline(RENEW_DEADLINE)
        .retry_period(RETRY)
}

/// How often a standby looks at the Lease.
const RETRY: Duration = Duration::from_millis(500);
/// The Lease's duration: long beside [`HAND_OVER`], so that a standby that waited the Lease out instead of
/// taking the released one cannot pass for one that took it.
const LEASE: Duration = Duration::from_secs(20);
const RENEW_DEADLINE: Duration = Duration::from_secs(15);
/// How long a standby may take to lead once the leader released the Lease: five times what it needs on an
/// idle machine (its next look, one more for a look that raced the release, and the requests).
const HAND_OVER: Duration = Duration::from_secs(5);
/// The lease duration of the replica that takes a stranger's Lease over: what it waits, not the stranger's.
const SHORT_LEASE: Duration = Duration::from_secs(5);

async fn replica(env: &TestEnv, identity: &str, reconciler: Elected) -> kubeplex::Running {
    replica_on(env, election(identity), reconciler).await
}

async fn replica_on(
    env: &TestEnv,
    election: LeaderElection,
    reconciler: Elected,
) -> kubeplex::Running {
    let identity = election.identity().to_owned();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .leader_election(election)
        .controller(reconciler)
        .start()
        .await
        .unwrap();
    wait_started(&running, &identity).await;
    running
}

async fn holder(env: &TestEnv) -> Option<String> {
    holder_of(env, "elected").await
}

async fn holder_of(env: &TestEnv, lease: &str) -> Option<String> {
    let control = env.client("control").await.unwrap();
    let leases: Api<Lease> = Api::namespaced(control, NAMESPACE);
    let lease = leases.get_opt(lease).await.unwrap()?;
    lease.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_lease_with_a_huge_duration_is_taken_over_after_our_own() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, NAMESPACE).await;
    let leases: Api<Lease> = Api::namespaced(control, NAMESPACE);
    let ghost: Lease = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "haunted" },
        "spec": {
            "holderIdentity": "ghost",
            "leaseDurationSeconds": i32::MAX,
            "renewTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        },
    }))
    .unwrap();
    leases
        .create(&kube::api::PostParams::default(), &ghost)
        .await
        .unwrap();
    let election = LeaderElection::new(Fleet::Control, NAMESPACE, "haunted")
        .with_identity("replica-h")
        .lease_duration(SHORT_LEASE)
        .renew_deadline(SHORT_LEASE - Duration::from_secs(2))
        .retry_period(RETRY);
    let running = replica_on(env, election, Elected::default()).await;
    // The ghost never renews: the Lease is the replica's once it has seen it unchanged for its own duration
    // (not the Lease's 68 years), give or take a round and a loaded machine.
    eventually(
        "replica-h takes the ghost's Lease over",
        SHORT_LEASE + HAND_OVER,
        async || holder_of(env, "haunted").await.as_deref() == Some("replica-h"),
    )
    .await;
    let (_, body) = probe(running.probe_address().unwrap(), "/readyz").await;
    assert_eq!(body["leadership"]["role"], "leader", "{body}");
    crate::support::stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_replica_leads_the_other_stands_by_and_takes_over_when_it_leaves() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, NAMESPACE).await;

    let (first, second) = (Elected::default(), Elected::default());
    let a = replica(env, "replica-a", first.clone()).await;
    eventually("replica-a holds the Lease", WAIT, async || {
        holder(env).await.as_deref() == Some("replica-a")
    })
    .await;
    let b = replica(env, "replica-b", second.clone()).await;

    put_config_map(&control, NAMESPACE, "one", "1").await;
    first
        .seen
        .wait_for("the leader reconciles", WAIT, |seen| {
            seen.iter().any(|s| s.name == "one")
        })
        .await;

    // The standby is ready (it can take over) and says who leads, once it has read the Lease (it may not
    // have yet when the leader's first reconcile is seen).
    let address = b.probe_address().unwrap();
    let body = eventually(
        "replica-b stands by for replica-a",
        WAIT,
        async || match probe(address, "/readyz").await {
            (200, body) if body["leadership"]["holder"] == "replica-a" => Ok(body),
            (code, body) => Err(format!("{code}: {body}")),
        },
    )
    .await;
    assert_eq!(body["leadership"]["role"], "standby", "{body}");
    assert_eq!(body["leadership"]["identity"], "replica-b", "{body}");
    let (_, body) = probe(a.probe_address().unwrap(), "/readyz").await;
    assert_eq!(body["leadership"]["role"], "leader", "{body}");
    assert!(
        second.seen.all().is_empty(),
        "the standby reconciled: {:?}",
        second.seen.all()
    );

    // Hand the Lease over: the leader gives it up on shutdown, the standby reconciles what is cached at once
    // (without waiting for the Lease to expire) and what changes next.
    crate::support::stop(a).await;
    eventually(
        "replica-b holds the released Lease",
        HAND_OVER,
        async || holder(env).await.as_deref() == Some("replica-b"),
    )
    .await;
    second
        .seen
        .wait_for("the new leader reconciles the cache", WAIT, |seen| {
            seen.iter().any(|s| s.name == "one")
        })
        .await;
    put_config_map(&control, NAMESPACE, "two", "2").await;
    second
        .seen
        .wait_for("the new leader reconciles a change", WAIT, |seen| {
            seen.iter().any(|s| s.name == "two")
        })
        .await;
    let (_, body) = probe(b.probe_address().unwrap(), "/readyz").await;
    assert_eq!(body["leadership"]["role"], "leader", "{body}");
    crate::support::stop(b).await;
}

#[tokio::test]
async fn timings_that_cannot_fence_are_refused_at_start() {
    let env = env().await;
    let unsafe_timings = election("replica-x").renew_deadline(LEASE);
    let error = Manager::with_kubeconfig(env.kubeconfig().clone())
        .leader_election(unsafe_timings)
        .controller(Elected::default())
        .start()
        .await
        .err()
        .expect("refused");
    let message = error.to_string();
    assert!(
        message.starts_with("leader election (Lease elected/elected): the renew deadline"),
        "{message}"
    );
}
