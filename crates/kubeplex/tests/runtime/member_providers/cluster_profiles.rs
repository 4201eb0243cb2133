//! Members from ClusterProfiles on real clusters: cluster-c published as a ClusterProfile in the control
//! cluster, whose CRD is the Cluster Inventory API's own file (v1alpha1, the storage version) with v1alpha2
//! served beside it, so kubeplex reads v1alpha2. The members are reached through the Cluster Inventory API's
//! own exec plugins (`secretreader`, `kubeconfig-secretreader`, built from its Go module), named by an
//! access-providers file; they read the Secret the profile's `client.authentication.k8s.io/exec` extension
//! names, as kube hands them the cluster (`provideClusterInfo`), so a join proves the extension reaches
//! the plugin.

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kubeplex::prelude::*;
use kubeplex::{Running, members::AccessProviders, members::ClusterProfiles, members::LeavePolicy};
use kubeplex_testenv::{ClusterInventory, TestEnv};
use serde_json::{Value, json};

use super::accounts::{MEMBER, account_token, admin_kubeconfig, revoke, text, token_kubeconfig};
use super::{start, write};
use crate::spread::{
    Spread, create_spread, has_child, set_value, spreader, wait_child, wait_child_value, wait_until,
};
use crate::support::logs::Logs;
use crate::support::{Fleet, probe, reasons, wait_context_status};

spreader!(ProfilesJoin, "spread-profiles");
spreader!(ProfilesReported, "spread-profiles-reported");
spreader!(ProfilesOneMember, "spread-profiles-member");

/// What the failing plugin prints before it fails: never to be seen in a log or a probe.
const PLUGIN_OUTPUT: &str = "plugin-output-with-a-s3cr3t";

/// The ClusterProfile resource in `version`.
fn resource(version: &str) -> kube::core::ApiResource {
    let gvk = kube::core::GroupVersionKind::gvk("multicluster.x-k8s.io", version, "ClusterProfile");
    kube::core::ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles")
}

/// The ClusterProfile CRD: the Cluster Inventory API's file (v1alpha1 only so far) with the v1alpha2
/// version written from its Go types served beside it.
pub fn crd() -> CustomResourceDefinition {
    let inventory = ClusterInventory::locate_or_build().unwrap();
    let upstream = std::fs::read_to_string(inventory.crd_yaml()).unwrap();
    let mut crd: CustomResourceDefinition = serde_saphyr::from_str(&upstream).unwrap();
    let v1alpha2 = serde_saphyr::from_str(include_str!("clusterprofile-v1alpha2.yaml")).unwrap();
    crd.spec.versions.push(v1alpha2);
    crd
}

/// The access-providers file in `dir` naming the Cluster Inventory API's plugins, which read their Secrets
/// from `namespace` of the control cluster (their KUBECONFIG's current namespace), and `broken`, which prints
/// [`PLUGIN_OUTPUT`] and fails with exit status 3.
fn access_providers(env: &TestEnv, dir: &Path, namespace: &str) -> AccessProviders {
    use std::os::unix::fs::PermissionsExt as _;
    let inventory = ClusterInventory::locate_or_build().unwrap();
    let mut control = env.kubeconfig().clone();
    control.contexts.retain(|c| c.name == "control");
    control.contexts[0].context.as_mut().unwrap().namespace = Some(namespace.to_owned());
    control.current_context = Some("control".into());
    let kubeconfig = dir.join("control-kubeconfig");
    write(&kubeconfig, &text(&control));
    let broken = dir.join("broken");
    let script = format!("#!/bin/sh\necho {PLUGIN_OUTPUT}\necho {PLUGIN_OUTPUT} >&2\nexit 3\n");
    std::fs::write(&broken, script).unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = |command: &Path| {
        json!({ "apiVersion": "client.authentication.k8s.io/v1", "command": command,
            "provideClusterInfo": true,
            "env": [{ "name": "KUBECONFIG", "value": kubeconfig.to_string_lossy() }] })
    };
    let file = json!({ "providers": [
        { "name": "secretreader", "execConfig": exec(inventory.secretreader()) },
        { "name": "kubeconfig-secretreader", "execConfig": exec(inventory.kubeconfig_secretreader()) },
        { "name": "broken", "execConfig": exec(&broken) },
    ]});
    let path = dir.join("access-providers.json");
    std::fs::write(&path, file.to_string()).unwrap();
    AccessProviders::from_file(&path).unwrap()
}

/// An access provider `name` reaching cluster-c, its exec extension `config`.
fn offer(env: &TestEnv, name: &str, config: Value) -> Value {
    let kubeconfig = admin_kubeconfig(env);
    let mut cluster =
        serde_json::to_value(kubeconfig.clusters[0].cluster.clone().unwrap()).unwrap();
    cluster["extensions"] =
        json!([{ "name": "client.authentication.k8s.io/exec", "extension": config }]);
    json!({ "name": name, "cluster": cluster })
}

/// `secretreader`'s extension: the token in Secret `secret` of the profiles' namespace.
fn token_secret(secret: &str) -> Value {
    json!({ "clusterName": secret })
}

/// Writes `token` to Secret `name` of `api`'s namespace in the control cluster, as `secretreader` reads it.
async fn put_token(env: &TestEnv, api: &Api<DynamicObject>, name: &str, token: &str) {
    put_secret(env, api, name, "token", token).await;
}

/// Writes `value` under `key` of Secret `name` of `api`'s namespace in the control cluster.
async fn put_secret(env: &TestEnv, api: &Api<DynamicObject>, name: &str, key: &str, value: &str) {
    let client = env.client("control").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, api.namespace().unwrap());
    let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name },
        "stringData": { key: value } });
    let params = PatchParams::apply("profiles-test").force();
    secrets
        .patch(name, &params, &Patch::Apply(secret))
        .await
        .unwrap();
}

/// A `ControlPlaneHealthy` condition with `status`.
fn healthy(status: &str) -> Value {
    json!([{ "type": "ControlPlaneHealthy", "status": status, "reason": "Probed",
        "message": "as the cluster manager saw it", "lastTransitionTime": "2026-01-01T00:00:00Z" }])
}

/// The ClusterProfiles of a fresh namespace of `control`, written in `version`.
async fn profiles(env: &TestEnv, version: &str) -> Api<DynamicObject> {
    let namespace = env
        .create_namespace(&["control"], "profiles")
        .await
        .unwrap();
    let client = env.client("control").await.unwrap();
    Api::namespaced_with(client, &namespace, &resource(version))
}

/// Creates ClusterProfile `name` with `labels` and `status`.
async fn create_profile(api: &Api<DynamicObject>, name: &str, labels: Value, status: Value) {
    // `/apis/<group>/<version>/namespaces/…`
    let version = api.resource_url().split('/').nth(3).unwrap();
    let mut profile = DynamicObject::new(name, &resource(version));
    profile.metadata.labels = serde_json::from_value(labels).unwrap();
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
    let api = profiles(env, "v1alpha2").await;
    put_token(env, &api, "cluster-c-token", &first).await;
    let namespace = api.namespace().unwrap_or_default().to_owned();
    let member = format!("{namespace}-cluster-c");
    let access = access_providers(env, dir.path(), &namespace);
    let provider = ClusterProfiles::new(Fleet::Control, &namespace, access);
    let running = start(env, ProfilesJoin, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-profiles", "web").await;
    let child = "web-profiles-join";
    wait_child(env, "cluster-a", child, true).await;

    // Published with its control plane not healthy yet: reported, not joined.
    let status = |health: &str| {
        json!({ "conditions": healthy(health),
        "accessProviders": [offer(env, "secretreader", token_secret("cluster-c-token"))] })
    };
    create_profile(&api, "cluster-c", json!({}), status("False")).await;
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

    // The token revoked and a new one in the Secret the plugin reads: writes go through again, no restart.
    revoke(env, &accounts, "profile-1", &first).await;
    let second = account_token(env, &accounts, "profile-2").await;
    put_token(env, &api, "cluster-c-token", &second).await;
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
    let api = profiles(env, "v1alpha2").await;
    let token = account_token(env, &accounts, "reported").await;
    put_token(env, &api, "cluster-c-token", &token).await;
    let namespace = api.namespace().unwrap_or_default().to_owned();
    let access = access_providers(env, dir.path(), &namespace);
    let provider = ClusterProfiles::new(Fleet::Control, &namespace, access);
    let running = start(env, ProfilesReported, provider, LeavePolicy::Orphan).await;
    create_spread(env, "spread-profiles-reported", "web").await;

    let offered = |name: &str| {
        json!({ "conditions": healthy("True"),
        "accessProviders": [offer(env, name, token_secret("cluster-c-token"))] })
    };
    create_profile(&api, "unknown", json!({}), offered("theirs")).await;
    create_profile(&api, "failing", json!({}), offered("broken")).await;
    create_profile(&api, "good", json!({}), offered("secretreader")).await;
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
    // The status says it at once; the log line comes when the runner takes the failure up to try it again.
    kubeplex_testenv::eventually(
        "the plugin's failure logged",
        crate::support::WAIT,
        async || logs.text().contains("exit status: 3"),
    )
    .await;
    crate::support::stop(running).await;
    let logged = logs.text();
    assert!(!logged.contains(PLUGIN_OUTPUT), "{logged}");
}

#[tokio::test]
async fn profiles_of_one_inventory_member_join_it_once_through_either_upstream_plugin() {
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "one-member").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let api = profiles(env, "v1alpha2").await;
    let namespace = api.namespace().unwrap_or_default().to_owned();
    // `secretreader`'s token, and a kubeconfig with another token for `kubeconfig-secretreader`.
    let read = account_token(env, &accounts, "secretreader").await;
    put_token(env, &api, "cluster-c-token", &read).await;
    let kubeconfig = account_token(env, &accounts, "kubeconfig").await;
    let kubeconfig_text = text(&token_kubeconfig(env, &kubeconfig));
    put_secret(env, &api, "cluster-c-kubeconfig", "value", &kubeconfig_text).await;
    let access = access_providers(env, dir.path(), &namespace);
    let provider = ClusterProfiles::new(Fleet::Control, &namespace, access);
    let running = start(env, ProfilesOneMember, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-profiles-member", "web").await;
    let child = "web-profiles-one-member";

    // One cluster published by two cluster managers, each offering its own way in.
    let member_id = json!({ "multicluster.x-k8s.io/inventory-member-id": "cluster-c" });
    let kubeconfig_secret = json!({ "name": "cluster-c-kubeconfig", "key": "value" });
    let ocm = json!({ "conditions": healthy("True"),
        "accessProviders": [offer(env, "kubeconfig-secretreader", kubeconfig_secret)] });
    let fleet = json!({ "conditions": healthy("True"),
        "accessProviders": [offer(env, "secretreader", token_secret("cluster-c-token"))] });
    create_profile(&api, "ocm-cluster-c", member_id.clone(), ocm).await;
    create_profile(&api, "fleet-cluster-c", member_id, fleet).await;
    // A profile written in v1alpha1 offering access only as `credentialProviders`, which v1alpha2 lacks.
    let legacy = json!({ "conditions": healthy("True"),
        "credentialProviders": [offer(env, "secretreader", token_secret("cluster-c-token"))] });
    let v1alpha1 =
        Api::namespaced_with(api.clone().into_client(), &namespace, &resource("v1alpha1"));
    create_profile(&v1alpha1, "legacy", json!({}), legacy).await;

    let member = format!("{namespace}-cluster-c");
    status_of(&running, &member, "ready").await;
    wait_child(env, MEMBER, child, true).await;
    let legacy = format!("{namespace}-legacy");
    status_saying(&running, &legacy, "failing", "offers no access provider").await;
    let members = |running: &Running| -> Vec<String> {
        let clusters = running.readiness().clusters;
        clusters
            .into_keys()
            .filter(|c| c.starts_with(&namespace))
            .collect()
    };
    assert_eq!(members(&running), [member.clone(), legacy.clone()]);

    // The profile it joined through (the first by name, `secretreader`'s) deleted and its token revoked:
    // it carries on through `kubeconfig-secretreader`'s.
    api.delete("fleet-cluster-c", &DeleteParams::default())
        .await
        .unwrap();
    revoke(env, &accounts, "secretreader", &read).await;
    set_value(env, "spread-profiles-member", "web", "v2").await;
    wait_child_value(env, MEMBER, child, "v2").await;
    status_of(&running, &member, "ready").await;

    // The last of its profiles deleted: it leaves under `delete`.
    api.delete("ocm-cluster-c", &DeleteParams::default())
        .await
        .unwrap();
    wait_child(env, MEMBER, child, false).await;

    // Read in v1alpha2 throughout: no request of the operator's for the profiles used v1alpha1.
    let uris: Vec<String> = crate::support::audit::requests(env, "control")
        .into_iter()
        .filter(|r| r.agent.starts_with("kubeplex/"))
        .map(|r| r.uri)
        .filter(|uri| uri.contains(&format!("/namespaces/{namespace}/clusterprofiles")))
        .collect();
    let v1alpha2 =
        format!("/apis/multicluster.x-k8s.io/v1alpha2/namespaces/{namespace}/clusterprofiles");
    assert!(
        !uris.is_empty(),
        "no request for the profiles by the operator"
    );
    assert!(
        uris.iter().all(|uri| uri.starts_with(&v1alpha2)),
        "{uris:#?}"
    );
    crate::support::stop(running).await;
}
