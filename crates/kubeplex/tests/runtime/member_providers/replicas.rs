//! Two replicas under leader election, each following the same member Secrets, judged from the API servers'
//! audit logs (each replica's requests name it in their `User-Agent`): while one leads, the standby writes
//! nothing — it neither deletes a leaving member's children nor releases the member's Secret — and a leader
//! cut off from the control cluster in the middle of a leave writes nothing to the member once the other
//! replica has taken over; the new leader finishes the leave.
//!
//! The member's credentials may not delete its children at first, so the leave waits (tried again each 5 s)
//! for as long as the test needs; `delete` is granted when the test lets it end.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kubeplex::prelude::*;
use kubeplex::{Running, ha::LeaderElection, members::LeavePolicy, readiness::MemberPhase};
use kubeplex_testenv::{TestEnv, eventually};

use super::accounts::{MEMBER, account_token_without_delete, grant_delete, text, token_kubeconfig};
use super::proxy::{Mode, Proxy};
use super::refused::{ChildHistory, REFUSING};
use super::unreachable::finalizers;
use super::{env, member_secret, secrets_provider};
use crate::spread::{Spread, children, create_spread, prepare, spreader, wait_child};
use crate::support::audit::{Request, deletes_of, lines, writes};
use crate::support::{Fleet, WAIT, create_namespace, probe, wait_started};

spreader!(StandbyLeave, "spread-standby");
spreader!(CutLeave, "spread-cut");

/// The Lease's name (in the parents' namespace).
const LEASE: &str = "members";
/// How long the replicas are watched after the leave ended: longer than two of a leave's tries (5 s
/// apart), so a replica still trying would be seen.
const SETTLE: Duration = Duration::from_secs(12);

/// Short timings keep the test quick; they keep the fencing order (retry < renew deadline < lease).
fn election(namespace: &str, identity: &str) -> LeaderElection {
    LeaderElection::new(Fleet::Control, namespace, LEASE)
        .with_identity(identity)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500))
}

/// A replica named `identity` on `kubeconfig`, with members from the Secrets of `provider` under `delete`.
async fn replica(
    kubeconfig: kube::config::Kubeconfig,
    namespace: &str,
    identity: &str,
    controller: impl Reconcile,
    provider: kubeplex::members::KubeconfigSecrets,
) -> Running {
    let running = Manager::with_kubeconfig(kubeconfig)
        .probes("127.0.0.1:0")
        .ping_interval(Duration::from_millis(500))
        .leader_election(election(namespace, identity))
        .controller(controller)
        .members(provider, LeavePolicy::Delete)
        .start()
        .await
        .unwrap();
    wait_started(&running, identity).await;
    running
}

/// Waits until `running` says it holds the Lease.
async fn wait_role(running: &Running, role: &str) {
    let address = running.probe_address().unwrap();
    eventually(format!("role {role}"), WAIT, async || {
        let body = probe(address, "/readyz").await.1;
        match body["leadership"]["role"] == role {
            true => Ok(()),
            false => Err(format!("{body:#}")),
        }
    })
    .await;
}

/// Waits until `running` shows the member leaving, waiting for a reason that contains `text`.
async fn wait_leaving_for(running: &Running, text: &str) -> String {
    eventually(format!("{REFUSING} leaving for {text}"), WAIT, async || {
        let report = running.readiness();
        let phase = report.clusters.get(REFUSING).and_then(|c| c.member.clone());
        match phase {
            Some(p) if p.phase == MemberPhase::Leaving => match p.waiting_for {
                Some(why) if why.contains(text) => Ok(why),
                other => Err(format!("waiting for {other:?}")),
            },
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// Waits until the member's Secret is gone, and its child was deleted before that.
async fn wait_left(env: &TestEnv, secrets: &Api<Secret>, child: &str) {
    let members_children = children(env, MEMBER).await;
    eventually("the child deleted and the Secret gone", WAIT, async || {
        let found = members_children.get_opt(child).await;
        let found = found.map_err(|e| e.to_string())?;
        match (found, finalizers(secrets, REFUSING).await) {
            (None, None) => Ok(()),
            (Some(_), None) => panic!("the Secret went while the child was still there"),
            (child, held) => Err(format!(
                "child present: {}, Secret: {held:?}",
                child.is_some()
            )),
        }
    })
    .await;
}

/// The deletes of `child` in the member by `identity`.
fn deletes_by<'a>(all: &'a [Request], identity: &str, child: &str) -> Vec<&'a Request> {
    deletes_of(all, child).filter(|w| w.by(identity)).collect()
}

/// Checks in the audit logs that replica `leader` ended the leave of the member: its delete of `child` in
/// the member, and its patch releasing the member's Secret (in namespace `members` of the control
/// cluster), were accepted; and that replica `other` wrote neither to the member nor to that Secret from
/// `since` on (ever, when `None`). Returns the member's writes.
fn leave_ended_by(
    env: &TestEnv,
    members: &str,
    child: &str,
    (leader, other): (&str, &str),
    since: Option<Timestamp>,
) -> Vec<Request> {
    let late = |w: &&Request| w.by(other) && since.is_none_or(|at| w.at > at);
    let member = writes(env, MEMBER);
    let by_other: Vec<&Request> = member.iter().filter(late).collect();
    assert!(
        by_other.is_empty(),
        "{other} wrote to the member (since {since:?}):\n{}",
        lines(by_other)
    );
    let deleted = deletes_by(&member, leader, child);
    assert!(
        deleted.iter().any(|w| w.accepted()),
        "{leader} never deleted the child:\n{}",
        lines(deleted)
    );
    let secret = format!("secrets {members}/{REFUSING}");
    let control = writes(env, "control");
    let released: Vec<&Request> = control.iter().filter(|w| w.what == secret).collect();
    assert!(
        !released.iter().any(late),
        "{other} wrote the member's Secret (since {since:?}):\n{}",
        lines(released.iter().copied())
    );
    assert!(
        released
            .iter()
            .any(|w| w.by(leader) && w.verb == "patch" && w.accepted()),
        "{leader} never released the member's Secret:\n{}",
        lines(released.iter().copied())
    );
    member
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_neither_deletes_a_leaving_members_children_nor_releases_its_secret() {
    let env = env().await;
    prepare(env).await;
    let namespace = "spread-standby";
    create_namespace(&env.client("control").await.unwrap(), namespace).await;
    let accounts = env.create_namespace(&[MEMBER], "standby").await.unwrap();
    let token = account_token_without_delete(env, &accounts, "member").await;
    let (secrets, provider) = secrets_provider(env).await;
    let members = secrets.namespace().unwrap().to_owned();
    let (ia, ib) = ("standby-test-a", "standby-test-b");
    let kubeconfig = env.kubeconfig().clone();
    let a = replica(
        kubeconfig.clone(),
        namespace,
        ia,
        StandbyLeave,
        provider.clone(),
    )
    .await;
    wait_role(&a, "leader").await;
    let b = replica(kubeconfig, namespace, ib, StandbyLeave, provider).await;
    wait_role(&b, "standby").await;

    create_spread(env, namespace, "web").await;
    let child = "web-standby-leave";
    let kubeconfig = text(&token_kubeconfig(env, &token));
    let secret = member_secret(REFUSING, Some(REFUSING), &kubeconfig);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    let history = ChildHistory::follow(children(env, MEMBER).await, child).await;

    // The Secret deleted: both replicas see the member leave; the leader's deletes are refused (403) and
    // tried again, and the standby, which follows the leave too, must send none.
    secrets
        .delete(REFUSING, &DeleteParams::default())
        .await
        .unwrap();
    wait_leaving_for(&a, "403").await;
    // The standby follows the leave, and says that it leaves the deletes to the leader.
    wait_leaving_for(&b, "this replica stands by: the leader deletes them").await;
    eventually("the leader's deletes refused twice", WAIT, async || {
        let count = deletes_by(&writes(env, MEMBER), ia, child).len();
        if count >= 2 {
            Ok(())
        } else {
            Err(format!("{count} so far"))
        }
    })
    .await;
    assert_eq!(
        finalizers(&secrets, REFUSING).await,
        Some(vec![kubeplex::members::MEMBER_FINALIZER.to_owned()])
    );
    assert!(crate::spread::has_child(env, MEMBER, child).await);

    grant_delete(env, &accounts, "member").await;
    wait_left(env, &secrets, child).await;
    // The standby's leave ends too: its cache shows the children gone.
    eventually("the standby forgot the member", WAIT, async || {
        match b.readiness().clusters.contains_key(REFUSING) {
            true => Err(format!("{:?}", b.readiness().clusters.get(REFUSING))),
            false => Ok(()),
        }
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(history.seen(), ["present", "deleted"]);

    // The leader ended the leave; the standby wrote nothing.
    leave_ended_by(env, &members, child, (ia, ib), None);
    crate::support::stop(b).await;
    crate::support::stop(a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_in_a_leave_writes_nothing_to_the_member_after_the_takeover() {
    let env = env().await;
    prepare(env).await;
    let namespace = "spread-cut";
    let control = env.client("control").await.unwrap();
    create_namespace(&control, namespace).await;
    let accounts = env.create_namespace(&[MEMBER], "cut").await.unwrap();
    let token = account_token_without_delete(env, &accounts, "member").await;
    let (secrets, provider) = secrets_provider(env).await;
    let members = secrets.namespace().unwrap().to_owned();
    let (ia, ib) = ("cut-test-a", "cut-test-b");
    // Replica A reaches the control cluster through a stand-in that can cut it off; the member directly.
    let relay = Proxy::start(&env.server_url("control").unwrap(), Mode::Forward).await;
    let mut through = env.kubeconfig().clone();
    let named = through.contexts.iter().find(|c| c.name == "control");
    let name = named.and_then(|c| c.context.clone()).unwrap().cluster;
    for cluster in through.clusters.iter_mut().filter(|c| c.name == name) {
        cluster.cluster.as_mut().unwrap().server = Some(relay.url());
    }
    let a = replica(through, namespace, ia, CutLeave, provider.clone()).await;
    wait_role(&a, "leader").await;
    let b = replica(env.kubeconfig().clone(), namespace, ib, CutLeave, provider).await;
    wait_role(&b, "standby").await;

    create_spread(env, namespace, "web").await;
    let child = "web-cut-leave";
    let kubeconfig = text(&token_kubeconfig(env, &token));
    let secret = member_secret(REFUSING, Some(REFUSING), &kubeconfig);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    secrets
        .delete(REFUSING, &DeleteParams::default())
        .await
        .unwrap();
    wait_leaving_for(&a, "403").await;

    // A's link to the control cluster goes silent: its renewals hang, its fence closes at its renew
    // deadline, and B takes the Lease a lease duration after it last saw it change. A goes on with the
    // leave (it still reaches the member), trying the deletes each 5 s.
    relay.listen(Mode::Blackhole).await;
    wait_role(&b, "leader").await;
    let takeover = eventually("B's first write of the Lease", WAIT, async || {
        let lease = format!("leases {namespace}/{LEASE}");
        let control = writes(env, "control");
        let taken = control
            .iter()
            .find(|w| w.what == lease && w.by(ib) && w.accepted());
        taken.map(|w| w.at).ok_or_else(|| "none yet".to_owned())
    })
    .await;
    let holder = Api::<Lease>::namespaced(control, namespace)
        .get(LEASE)
        .await
        .unwrap();
    assert_eq!(holder.spec.unwrap().holder_identity.as_deref(), Some(ib));
    // B carries the leave on (it stood by until it led): its own deletes are refused now, until allowed.
    wait_leaving_for(&b, "403").await;
    grant_delete(env, &accounts, "member").await;
    wait_left(env, &secrets, child).await;
    // A is still cut off and still leaving: it would write now if its member client were not fenced.
    tokio::time::sleep(SETTLE).await;

    // B ended the leave; A wrote nothing once B had taken over.
    let member = leave_ended_by(env, &members, child, (ib, ia), Some(takeover));
    assert!(
        !deletes_by(&member, ia, child).is_empty(),
        "A never tried to delete the child: the test shows nothing"
    );
    let still = a.readiness();
    let phase = still.clusters.get(REFUSING).and_then(|c| c.member.clone());
    println!("A, cut off, shows the member as {phase:?}; B took over at {takeover}");
    // Reconnected, so that A can release the Lease's hold and stop.
    relay.listen(Mode::Forward).await;
    crate::support::stop(a).await;
    crate::support::stop(b).await;
}
