//! The shipped member providers on real clusters, with a fourth cluster (cluster-c) as the member: it joins
//! and leaves through a kubeconfig Secret (its finalizer held until its children are deleted) and through a
//! kubeconfig file; a malformed Secret fails only its own member, with a reason naming the Secret; a token
//! rotated in the Secret with the old one revoked keeps the member working with no manual step; and a
//! token revoked under the file provider is read again from the file at the manager's request (a 401), while
//! one still rejected after that is reported and not reloaded in a loop. The typed context cluster-a keeps
//! its child throughout. (More in `member_providers/`: member kubeconfigs refused for what they would run
//! or read, exec credential plugins the manager allows, ClusterProfiles, Cluster API's Secrets, leaves,
//! unreachable members, a leave whose deletes are refused, two replicas under leader election; the
//! clusters write audit logs.)

pub mod accounts;
pub mod cluster_api;
pub mod cluster_profiles;
pub mod exec;
pub mod kubeconfig_allowlist;
pub mod leaves;
pub mod proxy;
pub mod refused;
pub mod replicas;
pub mod unreachable;

use std::path::Path;
use std::time::Duration;

use crate::spread::{
    Spread, children, create_spread, has_child, prepare, set_value, spreader, wait_child,
    wait_child_value, wait_until,
};
use crate::support::{Fleet, probe, reasons, wait_context_status, wait_started};
use accounts::{MEMBER, account_token, admin_kubeconfig, revoke, text, token_kubeconfig};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use kubeplex::prelude::*;
use kubeplex::{
    Running, members::KubeconfigFile, members::KubeconfigSecrets, members::LeavePolicy,
    members::MEMBER_FINALIZER,
};
use kubeplex_testenv::TestEnv;

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([
        ("control", Spread::crd()),
        ("control", cluster_profiles::crd()),
    ])
    .await
}

/// What the Secret provider selects.
const SELECTOR: (&str, &str) = ("fleet.test/member", "true");
/// The Secret registering cluster-c.
const SECRET: &str = "cluster-c-kubeconfig";
/// What `/readyz` says of a member whose credentials are rejected.
const REJECTED: &str = "credentials were rejected (401 Unauthorized)";

spreader!(SecretsJoin, "spread-secrets");
spreader!(SecretsMalformed, "spread-malformed");
spreader!(FileJoin, "spread-file");
spreader!(SecretsRotate, "spread-rotate");
spreader!(FileReload, "spread-reload");

/// Starts a manager of `controller` with members from `provider`, probes on a free port, and pings every
/// 500 ms (so that a rejected token is seen soon); waits until it has started.
async fn start(
    env: &TestEnv,
    controller: impl Reconcile,
    provider: impl kubeplex::members::MemberProvider,
    policy: LeavePolicy,
) -> Running {
    start_with(env, controller, provider, policy, |manager| manager).await
}

/// As [`start`], with the manager's options `configure` sets.
async fn start_with(
    env: &TestEnv,
    controller: impl Reconcile,
    provider: impl kubeplex::members::MemberProvider,
    policy: LeavePolicy,
    configure: impl FnOnce(Manager) -> Manager,
) -> Running {
    prepare(env).await;
    let running = configure(Manager::with_kubeconfig(env.kubeconfig().clone()))
        .probes("127.0.0.1:0")
        .ping_interval(Duration::from_millis(500))
        .controller(controller)
        .members(provider, policy)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the manager started").await;
    running
}

/// A Secret the provider selects, with `kubeconfig`; `member` labels the member's name.
fn member_secret(name: &str, member: Option<&str>, kubeconfig: &str) -> Secret {
    let mut labels = serde_json::Map::new();
    labels.insert(SELECTOR.0.into(), SELECTOR.1.into());
    if let Some(member) = member {
        labels.insert(kubeplex::members::MEMBER_NAME_LABEL.into(), member.into());
    }
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": labels },
        "stringData": { "kubeconfig": kubeconfig },
    }))
    .unwrap()
}

/// The Secrets of a fresh namespace of `control`, and the provider watching them.
async fn secrets_provider(env: &TestEnv) -> (Api<Secret>, KubeconfigSecrets) {
    let namespace = env.create_namespace(&["control"], "members").await.unwrap();
    let secrets = Api::namespaced(env.client("control").await.unwrap(), &namespace);
    let selector = format!("{}={}", SELECTOR.0, SELECTOR.1);
    let provider = KubeconfigSecrets::new(Fleet::Control, namespace, selector);
    (secrets, provider)
}

/// Writes `text` to `path` whole (a new file renamed over it), as a deployment tool would.
fn write(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// The member's reasons in `/readyz`, once it shows `status`.
async fn member_status(running: &Running, status: &str) -> String {
    let address = running.probe_address().unwrap();
    reasons(
        &wait_context_status(address, "/readyz", MEMBER, status).await,
        MEMBER,
    )
}

#[tokio::test]
async fn a_cluster_joins_by_its_secret_leaves_when_the_secret_is_deleted_and_joins_again() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SecretsJoin, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-secrets", "web").await;
    let child = "web-secrets-join";
    wait_child(env, "cluster-a", child, true).await;

    // Registering the cluster is creating its Secret.
    let secret = member_secret(SECRET, Some(MEMBER), &text(&admin_kubeconfig(env)));
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;
    // The finalizer is added before the member joins.
    let held = secrets.get(SECRET).await.unwrap();
    assert_eq!(held.finalizers(), [MEMBER_FINALIZER]);

    // Deleting it: the member leaves under `delete`, and only then does the finalizer let the Secret go.
    secrets
        .delete(SECRET, &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the member's Secret gone", async || {
        match secrets.get_opt(SECRET).await {
            Ok(None) => Ok(()),
            Ok(Some(held)) => Err(format!("finalizers: {:?}", held.finalizers())),
            Err(error) => Err(error.to_string()),
        }
    })
    .await;
    let left = children(env, MEMBER).await.get_opt(child).await.unwrap();
    assert!(
        left.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "the Secret went before the member's children"
    );
    let report = running.readiness();
    assert!(!report.clusters.contains_key(MEMBER), "{report:#?}");
    // The typed context kept its child.
    assert!(has_child(env, "cluster-a", child).await);

    // Registered again: it joins again and its children come back.
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_malformed_member_secret_fails_only_its_member_with_a_reason_naming_the_secret() {
    let env = env().await;
    let (secrets, provider) = secrets_provider(env).await;
    let namespace = secrets.namespace().unwrap_or_default().to_owned();
    let running = start(env, SecretsMalformed, provider, LeavePolicy::Orphan).await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-malformed", "web").await;

    // Cut mid-way, with a token in it: the reason must not quote it.
    let broken = "users: [{name: a, user: {token: \"s3cr3t-member-token\"";
    let params = PostParams::default();
    secrets
        .create(&params, &member_secret("broken", None, broken))
        .await
        .unwrap();
    let kubeconfig = text(&admin_kubeconfig(env));
    secrets
        .create(&params, &member_secret(SECRET, Some(MEMBER), &kubeconfig))
        .await
        .unwrap();

    let ready = wait_context_status(address, "/readyz", "broken", "failing").await;
    let reason = reasons(&ready, "broken");
    let expected = format!("member broken: Secret {namespace}/broken: not a valid kubeconfig");
    assert!(reason.starts_with(&expected), "{reason}");
    assert!(!reason.contains("s3cr3t"), "{reason}");
    // Everyone else carries on: the valid member gets its child, the typed contexts theirs.
    wait_child(env, MEMBER, "web-secrets-malformed", true).await;
    wait_child(env, "cluster-a", "web-secrets-malformed", true).await;
    let (code, ready) = probe(address, "/readyz").await;
    assert_eq!(code, 200, "{ready:#}");
    for context in ["control", "cluster-a"] {
        assert_eq!(ready["clusters"][context]["status"], "ready", "{ready:#}");
    }
    member_status(&running, "ready").await;
    assert_eq!(probe(address, "/startupz").await.0, 200);
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_context_of_a_kubeconfig_file_joins_leaves_when_removed_and_joins_again() {
    let env = env().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.kubeconfig");
    let empty = "apiVersion: v1\nkind: Config\n";
    write(&path, empty);
    let provider = KubeconfigFile::new(&path).interval(Duration::from_millis(200));
    let running = start(env, FileJoin, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-file", "web").await;
    let child = "web-file-join";
    wait_child(env, "cluster-a", child, true).await;

    let kubeconfig = text(&admin_kubeconfig(env));
    write(&path, &kubeconfig);
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;

    // Its context removed from the file: it leaves, and under `delete` its children go.
    write(&path, empty);
    wait_child(env, MEMBER, child, false).await;
    wait_until(
        "the member gone from the health report",
        async || match running.readiness().clusters.get(MEMBER) {
            Some(left) => Err(format!("still there: {left:?}")),
            None => Ok(()),
        },
    )
    .await;
    assert!(has_child(env, "cluster-a", child).await);

    write(&path, &kubeconfig);
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_token_rotated_in_the_secret_with_the_old_one_revoked_keeps_the_member_working() {
    let env = env().await;
    let accounts = env.create_namespace(&[MEMBER], "rotate").await.unwrap();
    let first = account_token(env, &accounts, "member-1").await;
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SecretsRotate, provider, LeavePolicy::Orphan).await;
    create_spread(env, "spread-rotate", "web").await;
    let child = "web-secrets-rotate";
    let kubeconfig = text(&token_kubeconfig(env, &first));
    let secret = member_secret(SECRET, Some(MEMBER), &kubeconfig);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;

    // The rotation, as a credentials tool does it: a new token into the Secret, the old one revoked.
    let second = account_token(env, &accounts, "member-2").await;
    let rotated = serde_json::json!({ "stringData": {
        "kubeconfig": text(&token_kubeconfig(env, &second)) } });
    let params = PatchParams::default();
    let opened = running.watches_opened();
    secrets
        .patch(SECRET, &params, &Patch::Merge(&rotated))
        .await
        .unwrap();
    // The Secret's change alone rotates the member, before any 401: it joins again (its watches reopen).
    wait_until(
        "the member joined again with the new token",
        async || match running.watches_opened() > opened {
            true => Ok(()),
            false => Err(format!("{opened} watches opened, as before")),
        },
    )
    .await;
    revoke(env, &accounts, "member-1", &first).await;

    // The member works on: a change reaches its child, and it is ready.
    set_value(env, "spread-rotate", "web", "v2").await;
    wait_child_value(env, MEMBER, child, "v2").await;
    wait_child_value(env, "cluster-a", child, "v2").await;
    member_status(&running, "ready").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_rejected_token_makes_the_file_be_read_again_and_one_still_rejected_is_reported() {
    let env = env().await;
    let accounts = env.create_namespace(&[MEMBER], "reload").await.unwrap();
    let first = account_token(env, &accounts, "member-1").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.kubeconfig");
    write(&path, &text(&token_kubeconfig(env, &first)));
    // Never polled again within the test: only a reload reads the file.
    let provider = KubeconfigFile::new(&path).interval(Duration::from_secs(3600));
    let running = start(env, FileReload, provider, LeavePolicy::Orphan).await;
    create_spread(env, "spread-reload", "web").await;
    let child = "web-file-reload";
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;

    // A new token in the file, the old one revoked: the pings get 401, the manager asks the provider to
    // read the member's credentials again, and the member carries on with the new token.
    let second = account_token(env, &accounts, "member-2").await;
    write(&path, &text(&token_kubeconfig(env, &second)));
    let opened = running.watches_opened();
    revoke(env, &accounts, "member-1", &first).await;
    set_value(env, "spread-reload", "web", "v2").await;
    wait_child_value(env, MEMBER, child, "v2").await;
    member_status(&running, "ready").await;
    // It joined again (a rejoin reopens the member's watches): what shows a reload below.
    assert!(
        running.watches_opened() > opened,
        "the member never joined again"
    );

    // The new token revoked too, with nothing new in the file: the member is reported with the
    // rejection, and it stays so: no reload (at most one per 5 minutes), so no rejoin reopens its watches.
    let opened = running.watches_opened();
    revoke(env, &accounts, "member-2", &second).await;
    let reason = member_status(&running, "failing").await;
    assert!(reason.contains(REJECTED), "{reason}");
    let address = running.probe_address().unwrap();
    // A stretch of ten ping intervals, looked at throughout: a reload would rejoin the member.
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < until {
        let ready = probe(address, "/readyz").await.1;
        let reason = reasons(&ready, MEMBER);
        assert!(reason.contains(REJECTED), "{ready:#}");
        assert_eq!(
            running.watches_opened(),
            opened,
            "the member was joined again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    crate::support::stop(running).await;
}
