//! Members on real clusters, through the programmatic provider: a member that joins gets every parent's
//! children within the wait, appears in `/readyz` and never holds back `/startupz`; one that leaves under
//! `delete` loses its children and its watches, under `orphan` keeps its children and the parents' status
//! says so; it can join again; a bad member is reported with its reason and holds back no one; the typed
//! contexts are unaffected throughout.

use std::sync::Arc;
use std::time::Duration;

use crate::spread::{
    APPS, Spread, SpreadSpec, child, create_spread, prepare, spreader, wait_child,
};
use crate::support::{
    Fleet, WAIT, create_namespace, probe, reasons, wait_context_status, wait_started,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use kube::config::KubeConfigOptions;
use kubeplex::prelude::*;
use kubeplex::{Manager, members::LeavePolicy, members::Members};
use kubeplex_testenv::{TestEnv, eventually};

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Spread::crd()), ("cluster-c", Spread::crd())]).await
}

spreader!(Deleting, "spread-delete");

/// Watches Spreads in control and in every member, and puts each one's child beside it, in `apps` of the
/// cluster it came from.
#[controller(
    crd = Spread,
    contexts = [Fleet::Control],
    members,
    namespaces = ["spread-local"],
    owns(ConfigMap, members, contexts = [Fleet::Control], namespaces = ["apps"]),
)]
struct Local {
    seen: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Reconcile for Local {
    type Error = kubeplex::Error;

    async fn reconcile(&self, parent: Arc<Spread>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let from = cx.cluster();
        let kind = if from.as_member().is_some() {
            "member"
        } else {
            "context"
        };
        // What the reconcile sees of the fleet: the cache of the cluster it came from, member or not, and
        // every cluster with its readiness.
        let cached = cx.cached::<Spread>(from.clone())?;
        let mut names: Vec<_> = cached
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        let clusters: Vec<String> = (cx.clusters().into_iter())
            .map(|(cluster, report)| format!("{cluster}={:?}", report.status))
            .collect();
        let mut seen = self.seen.lock();
        seen.push(format!("{kind} {from}"));
        seen.push(format!("{from} caches {}", names.join(",")));
        seen.push(format!("{from} knows {}", clusters.join(",")));
        drop(seen);
        cx.child(from, child(&parent, cx.controller()))?;
        Ok(Action::await_change())
    }
}

spreader!(Orphaning, "spread-orphan");

spreader!(Unprovided, "spread-unprovided");

/// How cluster-c is reached, as a provider would hand it over.
pub(crate) async fn cluster_c(env: &TestEnv) -> kube::Config {
    let options = KubeConfigOptions {
        context: Some("cluster-c".into()),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(env.kubeconfig().clone(), &options)
        .await
        .unwrap()
}

/// Polls the parent until `cluster`'s entry in its status is `state` (`None`: no entry).
async fn wait_cluster_state(
    env: &TestEnv,
    namespace: &str,
    name: &str,
    cluster: &str,
    state: Option<&str>,
) {
    let api: Api<Spread> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    let what = format!("{cluster} {state:?} in {name}'s status");
    eventually(what, WAIT, async || {
        let status = api.get(name).await.unwrap().status;
        let clusters = status.as_ref().map(|s| &s.fleet.clusters);
        let now = clusters
            .and_then(|c| c.get(cluster))
            .map(|c| c.state.as_str());
        if now == state {
            Ok(())
        } else {
            Err(format!("{status:#?}"))
        }
    })
    .await;
}

/// The text of `/metrics`.
async fn metrics(address: std::net::SocketAddr) -> String {
    crate::support::http_get(address, "/metrics").await.body
}

#[tokio::test]
async fn a_member_joins_gets_the_children_and_leaves_with_them_deleted_then_joins_again() {
    let env = env().await;
    prepare(env).await;
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .ping_interval(Duration::from_millis(500))
        .controller(Deleting)
        .members(members.clone(), LeavePolicy::Delete)
        .start()
        .await
        .unwrap();
    // A member that cannot be reached, and one whose name cannot be a member's: neither holds back the
    // start, and each is in /readyz with its reason.
    let mut nowhere = cluster_c(env).await;
    nowhere.cluster_url = "https://127.0.0.1:1".parse().unwrap();
    members.add("cluster-x", nowhere).await;
    members.add("Cluster_Y", cluster_c(env).await).await;
    wait_started(&running, "started beside an unreachable member").await;
    let address = running.probe_address().unwrap();
    assert_eq!(probe(address, "/startupz").await.0, 200);
    let ready = wait_context_status(address, "/readyz", "cluster-x", "failing").await;
    assert!(!reasons(&ready, "cluster-x").is_empty(), "{ready:#}");
    let named = reasons(&ready, "Cluster_Y");
    assert!(
        named.contains("member Cluster_Y") && named.contains("DNS-1123"),
        "{ready:#}"
    );

    create_spread(env, "spread-delete", "web").await;
    wait_child(env, "cluster-a", "web-deleting", true).await;

    members.add("cluster-c", cluster_c(env).await).await;
    wait_child(env, "cluster-c", "web-deleting", true).await;
    wait_cluster_state(env, "spread-delete", "web", "cluster-c", Some("Applied")).await;
    wait_context_status(address, "/readyz", "cluster-c", "ready").await;

    // Leaving under `delete`: once `remove` returns, the children are deleted and the watches closed.
    members.remove("cluster-c").await;
    let api: Api<ConfigMap> = Api::namespaced(env.client("cluster-c").await.unwrap(), APPS);
    let gone = api.get_opt("web-deleting").await.unwrap();
    assert!(
        gone.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "the child outlived its member's leave"
    );
    let report = running.readiness();
    assert!(!report.clusters.contains_key("cluster-c"), "{report:#?}");
    // Nor in /metrics: no series of any family names it (a fleet that turns over does not grow it).
    let scraped = metrics(address).await;
    let left: Vec<&str> = scraped
        .lines()
        .filter(|l| l.contains("cluster=\"cluster-c\""))
        .collect();
    assert!(
        left.is_empty(),
        "series still name the member that left: {left:#?}"
    );
    assert!(
        scraped.contains("kubeplex_member_changes_total{change=\"leave\",result=\"done\"}"),
        "{scraped}"
    );
    wait_cluster_state(env, "spread-delete", "web", "cluster-c", None).await;
    // The typed context kept its child.
    wait_child(env, "cluster-a", "web-deleting", true).await;

    // It joins again: its children come back.
    members.add("cluster-c", cluster_c(env).await).await;
    wait_child(env, "cluster-c", "web-deleting", true).await;
    wait_cluster_state(env, "spread-delete", "web", "cluster-c", Some("Applied")).await;
    members.remove("cluster-c").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_member_that_leaves_under_orphan_keeps_its_children_and_the_status_says_so() {
    let env = env().await;
    prepare(env).await;
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Orphaning)
        .members(members.clone(), LeavePolicy::Orphan)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    create_spread(env, "spread-orphan", "db").await;
    members.add("cluster-c", cluster_c(env).await).await;
    wait_child(env, "cluster-c", "db-orphaning", true).await;

    members.remove("cluster-c").await;
    wait_cluster_state(env, "spread-orphan", "db", "cluster-c", Some("Left")).await;
    // Still there, and no longer watched: a change to the parent does not reach it.
    let api: Api<ConfigMap> = Api::namespaced(env.client("cluster-c").await.unwrap(), APPS);
    assert!(api.get_opt("db-orphaning").await.unwrap().is_some());
    assert!(!running.readiness().clusters.contains_key("cluster-c"));
    crate::support::stop(running).await;
}

#[tokio::test]
async fn primaries_in_every_member_are_reconciled_where_they_live_with_their_children_and_status() {
    let env = env().await;
    prepare(env).await;
    create_namespace(&env.client("control").await.unwrap(), APPS).await;
    // A Spread in cluster-c before it is a member, and one in control.
    let cluster_c_client = env.client("cluster-c").await.unwrap();
    create_namespace(&cluster_c_client, "spread-local").await;
    let api: Api<Spread> = Api::namespaced(cluster_c_client, "spread-local");
    let spread = Spread::new("remote", SpreadSpec { value: "v1".into() });
    api.create(&PostParams::default(), &spread).await.unwrap();
    create_spread(env, "spread-local", "home").await;

    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Local { seen: seen.clone() })
        .members(members.clone(), LeavePolicy::Delete)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    wait_child(env, "control", "home-local", true).await;
    members.add("cluster-c", cluster_c(env).await).await;
    // Reconciled as cluster-c's: its child beside it, its status written there.
    wait_child(env, "cluster-c", "remote-local", true).await;
    eventually("a Ready status in cluster-c", WAIT, async || {
        let status = api.get("remote").await.unwrap().status;
        let ready = status
            .as_ref()
            .and_then(|s| s.fleet.clusters.get("cluster-c"));
        if ready.is_some_and(|c| c.state == kubeplex::ClusterState::Applied) {
            Ok(())
        } else {
            Err(format!("{status:#?}"))
        }
    })
    .await;
    let seen = seen.lock().clone();
    assert!(seen.contains(&"member cluster-c".to_owned()), "{seen:?}");
    assert!(seen.contains(&"context control".to_owned()), "{seen:?}");
    // The member's reconcile read the member's own cache, and saw both clusters and their readiness.
    let member_cache = seen.iter().find(|s| s.starts_with("cluster-c caches "));
    assert!(
        member_cache.is_some_and(|s| s
            .split(' ')
            .nth(2)
            .unwrap_or_default()
            .split(',')
            .any(|n| n == "remote")),
        "{seen:?}"
    );
    let known = seen
        .iter()
        .find(|s| s.starts_with("cluster-c knows "))
        .expect("cx.clusters in the member");
    assert!(
        known.contains("control=Ready") && known.contains("cluster-c="),
        "{known}"
    );
    // The control parent's child never went to the member.
    let control_child: Api<ConfigMap> =
        Api::namespaced(env.client("cluster-c").await.unwrap(), APPS);
    assert!(control_child.get_opt("home-local").await.unwrap().is_none());
    members.remove("cluster-c").await;
    crate::support::stop(running).await;
}

spreader!(HungPlugin, "spread-hung-plugin");

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with(['Z', 'X'])),
    }
}

#[tokio::test]
async fn a_member_whose_credential_plugin_hangs_holds_back_nothing_and_is_reported_at_its_deadline()
{
    use std::os::unix::fs::PermissionsExt as _;
    let env = env().await;
    prepare(env).await;
    // A plugin that says it started (its pid, once per run) and never answers.
    let dir = tempfile::tempdir().unwrap();
    let (plugin, pids) = (dir.path().join("plugin"), dir.path().join("pids"));
    let script = format!("#!/bin/sh\necho $$ >> {}\nexec sleep 600\n", pids.display());
    std::fs::write(&plugin, script).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut hung = cluster_c(env).await;
    hung.auth_info = serde_json::from_value(serde_json::json!({ "exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": plugin.to_string_lossy(),
    }}))
    .unwrap();

    // Long enough for the other member to join meanwhile (about 1 s on an idle machine), whatever the
    // machine's load.
    let deadline = Duration::from_secs(12);
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .ping_interval(Duration::from_millis(500))
        .credential_plugin_timeout(deadline)
        .controller(HungPlugin)
        .members(members.clone(), LeavePolicy::Orphan)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-hung-plugin", "web").await;
    wait_child(env, "cluster-a", "web-hung-plugin", true).await;

    let added = tokio::time::Instant::now();
    members.add("cluster-h", hung).await;
    let first = eventually("the plugin runs", WAIT, async || {
        let pids = std::fs::read_to_string(&pids).unwrap_or_default();
        pids.lines()
            .next()
            .map(str::to_owned)
            .ok_or_else(|| "not yet".to_owned())
    })
    .await;

    // While it hangs: the probes answer, the fixed contexts are pinged, another member joins and gets its
    // children.
    let live = tokio::time::timeout(Duration::from_secs(5), probe(address, "/livez")).await;
    assert_eq!(live.expect("/livez answers").0, 200);
    members.add("cluster-c", cluster_c(env).await).await;
    wait_child(env, "cluster-c", "web-hung-plugin", true).await;
    wait_context_status(address, "/readyz", "cluster-c", "ready").await;
    let ready = wait_context_status(address, "/readyz", "cluster-a", "ready").await;
    assert!(
        !ended(&first) && added.elapsed() < deadline,
        "the plugin's deadline passed before the other member joined: {ready:#}"
    );

    // Its deadline passed: stopped, and the member reported with the reason.
    let failing = wait_context_status(address, "/readyz", "cluster-h", "failing").await;
    let reason = reasons(&failing, "cluster-h");
    assert!(
        reason.contains("member cluster-h")
            && reason.contains("the credential plugin did not answer within 12 s"),
        "{failing:#}"
    );
    // The group was sent SIGKILL before the failure was reported; the kernel ends it on its own time.
    eventually(
        "the plugin stopped at its deadline",
        Duration::from_secs(5),
        async || ended(&first),
    )
    .await;
    assert!(added.elapsed() >= deadline);
    members.remove("cluster-h").await;
    members.remove("cluster-c").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_controller_declared_for_members_under_a_manager_without_a_provider_says_so_once() {
    let env = env().await;
    let (logs, _logging) = crate::support::logs::Logs::capture(tracing::Level::INFO);
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Unprovided)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    let lines = logs.lines();
    let said = lines.iter().filter(|l| {
        l.contains("declares members, but the manager has no member provider")
            && l.contains("unprovided")
    });
    assert_eq!(said.count(), 1, "{}", logs.text());
    crate::support::stop(running).await;
}
