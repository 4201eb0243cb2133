//! The status and the children are written only when they change: the example operator runs on a parent
//! until it is Ready, then reconciles it again and again without changing anything, then once with a real
//! change, and the audit logs count its patches of `appdeployments/status` in the control cluster and of the
//! children in cluster-a. A patch that changes nothing leaves no trace in the object (no new
//! resourceVersion), so only the API server's own record of the requests shows a runtime that writes on
//! every reconcile. The clusters are shared: only the requests in the test's own namespaces count.

use std::net::SocketAddr;

use crate::support::{Stage, eventually, stage};
use kube::api::{Api, Patch, PatchParams};
use kubeplex::{ClusterState, Context};
use kubeplex_fleet::{AppDeployment, Fleet};
use kubeplex_testenv::http_get;

const NAME: &str = "steady";
/// Reconciles that change nothing.
const IDLE_RECONCILES: usize = 5;

/// Whether an audit event of `cluster` is about [`NAME`] in the test's namespaces there: the parents' in
/// control, the children's elsewhere.
fn ours(stage: &Stage, cluster: Fleet, e: &serde_json::Value) -> bool {
    let namespace = e["objectRef"]["namespace"].as_str().unwrap_or("");
    let mine = match cluster {
        Fleet::Control => namespace == stage.parents,
        _ => stage.children.iter().any(|n| n == namespace),
    };
    mine && e["objectRef"]["name"] == NAME
}

/// Completed `patch` requests of `resource` (and `subresource`, when given) named [`NAME`] in the test's
/// namespaces of `cluster`, from its audit log.
fn patches(stage: &Stage, cluster: Fleet, resource: &str, subresource: Option<&str>) -> usize {
    let audited = stage.env.audit_events(cluster.name()).unwrap();
    audited
        .iter()
        .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == "patch")
        .filter(|e| e["objectRef"]["resource"] == resource && ours(stage, cluster, e))
        .filter(|e| e["objectRef"]["subresource"].as_str() == subresource)
        .count()
}

/// The writes to the parent and its children in cluster-a, in order, for a failure message.
fn trail(stage: &Stage) -> String {
    let mut lines = Vec::new();
    for cluster in [Fleet::Control, Fleet::ClusterA] {
        for e in stage.env.audit_events(cluster.name()).unwrap() {
            let write =
                ["create", "patch", "update", "delete"].contains(&e["verb"].as_str().unwrap_or(""));
            if e["stage"] == "ResponseComplete" && write && ours(stage, cluster, &e) {
                lines.push(format!(
                    "{} {cluster} {} {}{} by {}",
                    e["stageTimestamp"].as_str().unwrap_or(""),
                    e["verb"].as_str().unwrap_or(""),
                    e["objectRef"]["resource"].as_str().unwrap_or(""),
                    e["objectRef"]["subresource"]
                        .as_str()
                        .map(|s| format!("/{s}"))
                        .unwrap_or_default(),
                    e["userAgent"].as_str().unwrap_or(""),
                ));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

fn status_patches(stage: &Stage) -> usize {
    patches(stage, Fleet::Control, "appdeployments", Some("status"))
}

/// Applies of the parent's Deployments in cluster-a.
fn child_applies(stage: &Stage) -> usize {
    patches(stage, Fleet::ClusterA, "deployments", None)
}

/// Reconciles of the control context's parents the operator has finished, from its `/metrics`.
async fn reconciles(probes: SocketAddr) -> f64 {
    let metrics = http_get(probes, "/metrics").await.unwrap();
    (metrics.body.lines())
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter(|l| l.contains(r#"cluster="control""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Touches an annotation of the parent, which triggers one reconcile (annotations do, status writes do
/// not), and waits until the operator counts it as finished, its child applies and status write included.
async fn reconcile_once(probes: SocketAddr, apps: &Api<AppDeployment>, mark: &str) {
    let before = reconciles(probes).await;
    let patch =
        serde_json::json!({ "metadata": { "annotations": { "test.kubeplex.dev/touch": mark } } });
    apps.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(&format!("reconcile {mark} finished"), async || {
        let now = reconciles(probes).await;
        if now > before {
            Ok(())
        } else {
            Err(format!("{now} reconciles finished, as before"))
        }
    })
    .await;
}

/// Waits until the parent is Ready in both clusters with `children` children each, at its generation.
async fn wait_ready(apps: &Api<AppDeployment>, children: u32) -> AppDeployment {
    let what = format!("Ready with {children} children per cluster");
    eventually(&what, async || {
        let app = apps.get(NAME).await.unwrap();
        let fleet = app.status.as_ref().map(|s| &s.fleet);
        let ready = fleet.is_some_and(|f| {
            f.conditions.iter().any(|c| {
                c.type_ == "Applied"
                    && c.status == "True"
                    && c.observed_generation == app.metadata.generation
            }) && ["cluster-a", "cluster-b"].iter().all(|c| {
                f.clusters
                    .get(*c)
                    .is_some_and(|s| s.state == ClusterState::Applied && s.children == children)
            })
        });
        if ready {
            Ok(app)
        } else {
            Err(format!("{:#?}", app.status))
        }
    })
    .await
}

#[tokio::test]
async fn the_status_is_patched_once_per_real_change_and_never_by_an_idle_reconcile() {
    let stage = stage("status-writes").await;
    let running = crate::support::started(stage.manager().probes("127.0.0.1:0")).await;
    let probes = running.probe_address().unwrap();
    let apps = stage.apps().await;
    let children = stage.children.len();

    // Created, then Ready: one change of the status (from none to Ready everywhere).
    stage.apply(NAME, "nginx:1.27", 2).await;
    let ready = wait_ready(&apps, children as u32).await;
    reconcile_once(probes, &apps, "settled").await;
    assert_eq!(
        status_patches(&stage),
        1,
        "one status change from creation to Ready: {:#?}\n{}",
        ready.status,
        trail(&stage)
    );

    // Reconciles that change nothing write nothing: neither the children (still as the last apply left
    // them) nor the status.
    let applies = child_applies(&stage);
    for i in 0..IDLE_RECONCILES {
        reconcile_once(probes, &apps, &format!("idle-{i}")).await;
    }
    assert_eq!(
        child_applies(&stage),
        applies,
        "{IDLE_RECONCILES} reconciles that changed nothing applied the children again:\n{}",
        trail(&stage)
    );
    assert_eq!(
        status_patches(&stage),
        1,
        "{IDLE_RECONCILES} reconciles that changed nothing patched the status:\n{}",
        trail(&stage)
    );
    let idle = apps.get(NAME).await.unwrap();
    assert_eq!(idle.status, ready.status, "the status itself is unchanged");

    // A real change (a new generation, so a new observedGeneration) is written once.
    stage.apply(NAME, "nginx:1.27", 3).await;
    let changed = wait_ready(&apps, children as u32).await;
    assert_ne!(changed.status, ready.status);
    reconcile_once(probes, &apps, "changed").await;
    assert_eq!(
        child_applies(&stage),
        applies + children,
        "the new replica count applied once to each child:\n{}",
        trail(&stage)
    );
    assert_eq!(
        status_patches(&stage),
        2,
        "one more status change, one more patch: {:#?}\n{}",
        changed.status,
        trail(&stage)
    );
    crate::support::stop(running).await;
}
