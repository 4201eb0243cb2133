//! Members from ClusterProfiles on real clusters: cluster-c published as a ClusterProfile in the control
//! cluster, reached through an exec plugin named by an access-providers file. The plugin reads the token
//! from the file the profile's `client.authentication.k8s.io/exec` extension names, as kube hands it the
//! cluster (`provideClusterInfo`), so a join proves the extension reaches the plugin.

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kubeplex::prelude::*;
use kubeplex::{Running, members::AccessProviders, members::ClusterProfiles, members::LeavePolicy};
use kubeplex_testenv::TestEnv;
use serde_json::{Value, json};

use super::accounts::{MEMBER, account_token, admin_kubeconfig, revoke};
use super::{start, write};
use crate::spread::{
    Spread, create_spread, has_child, set_value, spreader, wait_child, wait_child_value, wait_until,
};
use crate::support::logs::Logs;
use crate::support::{Fleet, probe, reasons, wait_context_status};

spreader!(ProfilesJoin, "spread-profiles");
spreader!(ProfilesReported, "spread-profiles-reported");

/// What the failing plugin prints before it fails: never to be seen in a log or a probe.
const PLUGIN_OUTPUT: &str = "plugin-output-with-a-s3cr3t";

/// The ClusterProfile resource.
fn resource() -> kube::core::ApiResource {
    let gvk =
        kube::core::GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile");
    kube::core::ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles")
}

/// The ClusterProfile CRD, written from the Cluster Inventory API's documented fields.
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_str(include_str!("clusterprofile-crd.json")).unwrap()
}

/// The plugins in `dir` and the access-providers file naming them: `secretreader` prints an
/// ExecCredential with the token in the file that `spec.cluster.config.tokenFile` names; `broken` prints
/// [`PLUGIN_OUTPUT`] and fails with exit status 3.
fn access_providers(dir: &Path) -> AccessProviders {
    use std::os::unix::fs::PermissionsExt as _;
    let plugin = |name: &str, script: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    };
    let reader = plugin(
        "secretreader",
        "file=$(printf '%s' \"$KUBERNETES_EXEC_INFO\" | sed -n 's/.*\"tokenFile\":\"\\([^\"]*\\)\".*/\\1/p')\n\
         [ -n \"$file\" ] || { echo 'no tokenFile in spec.cluster.config' >&2; exit 2; }\n\
         printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
         \"status\":{\"token\":\"%s\"}}' \"$(cat \"$file\")\"",
    );
    let broken = plugin(
        "broken",
        &format!("echo {PLUGIN_OUTPUT}\necho {PLUGIN_OUTPUT} >&2\nexit 3"),
    );
    let exec = |command: String| {
        json!({ "apiVersion": "client.authentication.k8s.io/v1", "command": command,
            "provideClusterInfo": true })
    };
    let file = json!({ "providers": [
        { "name": "secretreader", "execConfig": exec(reader) },
        { "name": "broken", "execConfig": exec(broken) },
    ]});
    let path = dir.join("access-providers.json");
    std::fs::write(&path, file.to_string()).unwrap();
    AccessProviders::from_file(&path).unwrap()
}

/// An access provider `name` reaching cluster-c, its exec extension naming `token_file`.
fn offer(env: &TestEnv, name: &str, token_file: &Path) -> Value {
    let kubeconfig = admin_kubeconfig(env);
    let mut cluster =
        serde_json::to_value(kubeconfig.clusters[0].cluster.clone().unwrap()).unwrap();
    cluster["extensions"] = json!([{ "name": "client.authentication.k8s.io/exec",
        "extension": { "tokenFile": token_file.to_string_lossy() } }]);
    json!({ "name": name, "cluster": cluster })
}

/// A `ControlPlaneHealthy` condition with `status`.
fn healthy(status: &str) -> Value {
    json!([{ "type": "ControlPlaneHealthy", "status": status, "reason": "Probed",
        "message": "as the cluster manager saw it", "lastTransitionTime": "2026-01-01T00:00:00Z" }])
}

/// The ClusterProfiles of a fresh namespace of `control`.
async fn profiles(env: &TestEnv) -> Api<DynamicObject> {
    let namespace = env
        .create_namespace(&["control"], "profiles")
        .await
        .unwrap();
    let client = env.client("control").await.unwrap();
    Api::namespaced_with(client, &namespace, &resource())
}

/// Creates ClusterProfile `name` with `status`.
async fn create_profile(api: &Api<DynamicObject>, name: &str, status: Value) {
    let mut profile = DynamicObject::new(name, &resource());
    profile.data = json!({ "spec": { "clusterManager": { "name": "test" } } });
    api.create(&PostParams::default(), &profile).await.unwrap();
    set_status(api, name, status).await;
}

async fn set_status(api: &Api<DynamicObject>, name: &str, status: Value) {
    let patch = Patch::Merge(json!({ "status": status }));
    api.patch_status(name, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// The member's reasons in `/readyz`, once it shows `status`.
async fn status_of(running: &Running, member: &str, status: &str) -> String {
    let address = running.probe_address().unwrap();
    reasons(
        &wait_context_status(address, "/readyz", member, status).await,
        member,
    )
}

/// The member's reasons in `/readyz`, once it shows `status` with a reason containing `expected`: a profile
/// is created before its status is written, so its first reason may be that it has no status yet.
async fn status_saying(running: &Running, member: &str, status: &str, expected: &str) -> String {
    let address = running.probe_address().unwrap();
    let what = format!("{member} {status}, saying {expected:?}");
    kubeplex_testenv::eventually(what, crate::support::WAIT, async || {
        let body = probe(address, "/readyz").await.1;
        let reason = reasons(&body, member);
        match body["clusters"][member]["status"] == status && reason.contains(expected) {
            true => Ok(reason),
            false => Err(format!("{body:#}")),
        }
    })
    .await
}

#[tokio::test]
async fn a_cluster_profile_joins_when_healthy_recovers_a_revoked_token_and_leaves_when_deleted() {
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "profile").await.unwrap();
    let first = account_token(env, &accounts, "profile-1").await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write(&token, &first);
    let api = profiles(env).await;
    let namespace = api.namespace().unwrap_or_default().to_owned();
    let member = format!("{namespace}-cluster-c");
    let provider = ClusterProfiles::new(Fleet::Control, &namespace, access_providers(dir.path()));
    let running = start(env, ProfilesJoin, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-profiles", "web").await;
    let child = "web-profiles-join";
    wait_child(env, "cluster-a", child, true).await;

    // Published with its control plane not healthy yet: reported, not joined.
    let status = |health: &str| {
        json!({ "conditions": healthy(health),
        "accessProviders": [offer(env, "secretreader", &token)] })
    };
    create_profile(&api, "cluster-c", status("False")).await;
    status_saying(
        &running,
        &member,
        "failing",
        "its ControlPlaneHealthy condition is False (Probed",
    )
    .await;
    assert!(!has_child(env, MEMBER, child).await);

    // Healthy: it joins with the plugin's token, and its child appears.
    let healthy_at = tokio::time::Instant::now();
    set_status(&api, "cluster-c", status("True")).await;
    wait_child(env, MEMBER, child, true).await;
    println!(
        "ClusterProfile join: ControlPlaneHealthy=True to the first child in {:?}",
        healthy_at.elapsed()
    );
    status_of(&running, &member, "ready").await;

    // Unhealthy again: it stays a member (its child stays) and is reported; healthy, it is ready again.
    set_status(&api, "cluster-c", status("False")).await;
    status_saying(
        &running,
        &member,
        "failing",
        "ControlPlaneHealthy condition is False",
    )
    .await;
    assert!(has_child(env, MEMBER, child).await);
    set_status(&api, "cluster-c", status("True")).await;
    status_of(&running, &member, "ready").await;

    // The token revoked and a new one handed out by the plugin: writes go through again, no restart.
    revoke(env, &accounts, "profile-1", &first).await;
    let second = account_token(env, &accounts, "profile-2").await;
    write(&token, &second);
    set_value(env, "spread-profiles", "web", "v2").await;
    wait_child_value(env, MEMBER, child, "v2").await;
    status_of(&running, &member, "ready").await;

    // Deleted: the member leaves under `delete` (its children go), and nothing holds the profile.
    api.delete("cluster-c", &DeleteParams::default())
        .await
        .unwrap();
    wait_child(env, MEMBER, child, false).await;
    wait_until(
        "the member gone from the health report",
        async || match running.readiness().clusters.get(&member) {
            Some(left) => Err(format!("still there: {left:?}")),
            None => Ok(()),
        },
    )
    .await;
    assert!(api.get_opt("cluster-c").await.unwrap().is_none());
    assert!(has_child(env, "cluster-a", child).await);
    crate::support::stop(running).await;
}

#[tokio::test]
async fn profiles_offering_no_known_provider_or_a_failing_plugin_are_reported_and_others_join() {
    // The test's runtime is single-threaded: the manager's tasks log on this thread.
    let (logs, _logging) = Logs::capture(tracing::Level::DEBUG);
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "reported").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write(&token, &account_token(env, &accounts, "reported").await);
    let api = profiles(env).await;
    let namespace = api.namespace().unwrap_or_default().to_owned();
    let provider = ClusterProfiles::new(Fleet::Control, &namespace, access_providers(dir.path()));
    let running = start(env, ProfilesReported, provider, LeavePolicy::Orphan).await;
    create_spread(env, "spread-profiles-reported", "web").await;

    let offered = |name: &str| {
        json!({ "conditions": healthy("True"),
        "accessProviders": [offer(env, name, &token)] })
    };
    create_profile(&api, "unknown", offered("theirs")).await;
    create_profile(&api, "failing", offered("broken")).await;
    create_profile(&api, "good", offered("secretreader")).await;
    let expected = format!(
        "ClusterProfile {namespace}/unknown: offers access providers theirs, none of them known"
    );
    let unknown = format!("{namespace}-unknown");
    status_saying(&running, &unknown, "failing", &expected).await;
    let failing = format!("{namespace}-failing");
    status_saying(&running, &failing, "failing", "exit status: 3").await;

    // The one that works joins beside them, as do the typed contexts.
    wait_child(env, MEMBER, "web-profiles-reported", true).await;
    wait_child(env, "cluster-a", "web-profiles-reported", true).await;
    status_of(&running, &format!("{namespace}-good"), "ready").await;
    let (code, ready) = probe(running.probe_address().unwrap(), "/readyz").await;
    assert_eq!(code, 200, "{ready:#}");
    assert!(!ready.to_string().contains(PLUGIN_OUTPUT), "{ready:#}");
    crate::support::stop(running).await;
    let logged = logs.text();
    assert!(
        logged.contains("exit status: 3"),
        "the failure was not logged"
    );
    assert!(!logged.contains(PLUGIN_OUTPUT), "{logged}");
}
