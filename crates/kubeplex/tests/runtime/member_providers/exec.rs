//! A member whose kubeconfig Secret authenticates through an exec credential plugin: its token revoked and
//! the plugin handing out a new one, the member recovers with no change to its Secret, and `/readyz` says
//! its credentials were rejected in between; a plugin that fails when the member joins (its token server
//! down) is run again by the manager, and the member joins once it succeeds, its Secret unchanged. The
//! plugin is one the manager allows for members (`member_exec_commands`); none is by default.

use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kubeplex::members::LeavePolicy;
use kubeplex::prelude::*;
use kubeplex_testenv::TestEnv;

use super::accounts::{MEMBER, account_token, revoke, text, token_kubeconfig};
use super::{REJECTED, SECRET, member_secret, member_status, secrets_provider, start_with};
use crate::spread::{
    Spread, create_spread, has_child, set_value, spreader, wait_child, wait_child_value, wait_until,
};
use crate::support::{Fleet, probe, reasons};

spreader!(SecretsExec, "spread-exec");
spreader!(SecretsExecRetry, "spread-exec-retry");

/// Starts a manager of `controller` with members from `provider`, allowing the plugin of [`exec_kubeconfig`]
/// in `dir`.
async fn start(
    env: &TestEnv,
    controller: impl Reconcile,
    provider: impl kubeplex::members::MemberProvider,
    dir: &Path,
) -> kubeplex::Running {
    let plugin = dir.join("plugin").to_string_lossy().into_owned();
    let allow = |manager: kubeplex::Manager| manager.member_exec_commands([plugin]);
    start_with(env, controller, provider, LeavePolicy::Orphan, allow).await
}

/// An exec plugin in `dir` that prints an ExecCredential with the token in `token` (no expiry), and the
/// kubeconfig of cluster-c whose user is that plugin. While the file `down` exists, if one is named, the
/// plugin fails with exit status 3 instead.
fn exec_kubeconfig(env: &TestEnv, dir: &Path, token: &Path, down: Option<&Path>) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let plugin = dir.join("plugin");
    let fail = down.map_or(String::new(), |down| {
        format!("[ -e '{}' ] && exit 3\n", down.display())
    });
    let script = format!(
        "#!/bin/sh\n{fail}printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
         \"status\":{{\"token\":\"%s\"}}}}' \"$(cat {})\"\n",
        token.display()
    );
    std::fs::write(&plugin, script).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut kubeconfig = token_kubeconfig(env, "replaced-by-the-plugin");
    let exec = serde_json::json!({ "exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": plugin.to_string_lossy(),
        "interactiveMode": "Never",
    }});
    kubeplex_testenv::set_user(&mut kubeconfig, MEMBER, exec);
    text(&kubeconfig)
}

#[tokio::test]
async fn a_revoked_exec_token_is_asked_for_again_and_the_member_recovers_without_a_secret_change() {
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "exec").await.unwrap();
    let first = account_token(env, &accounts, "exec-1").await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    super::write(&token, &first);
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SecretsExec, provider, dir.path()).await;
    create_spread(env, "spread-exec", "web").await;
    let child = "web-secrets-exec";
    let secret = member_secret(
        SECRET,
        Some(MEMBER),
        &exec_kubeconfig(env, dir.path(), &token, None),
    );
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;

    // The token revoked, and the plugin still handing it out: rejected, whoever runs the plugin.
    let opened = running.watches_opened();
    revoke(env, &accounts, "exec-1", &first).await;
    let reason = member_status(&running, "failing").await;
    assert!(reason.contains(REJECTED), "{reason}");
    // The manager asks the provider to read the member's Secret again, once: it joins again from the
    // unchanged Secret, with the same token. Waited for, so that the recovery below is not that reload.
    wait_until("the member joined again from its Secret", async || {
        match running.watches_opened() > opened {
            true => Ok(()),
            false => Err(format!("{opened} watches opened, as before")),
        }
    })
    .await;
    let opened = running.watches_opened();
    let reason = member_status(&running, "failing").await;
    assert!(reason.contains(REJECTED), "{reason}");

    // A new token for the plugin to hand out, the Secret unchanged: the member's writes go through again.
    let second = account_token(env, &accounts, "exec-2").await;
    super::write(&token, &second);
    set_value(env, "spread-exec", "web", "v2").await;
    wait_child_value(env, MEMBER, child, "v2").await;
    member_status(&running, "ready").await;
    let ready = probe(running.probe_address().unwrap(), "/readyz").await.1;
    assert_eq!(reasons(&ready, MEMBER), "", "{ready:#}");
    assert_eq!(
        running.watches_opened(),
        opened,
        "the member joined again: the recovery was not the plugin's new token"
    );
    wait_child_value(env, "cluster-a", child, "v2").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_member_whose_plugin_fails_at_first_joins_once_it_succeeds_without_a_secret_change() {
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "exec-retry").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    super::write(&token, &account_token(env, &accounts, "exec-retry").await);
    let down = dir.path().join("token-server-down");
    std::fs::write(&down, "").unwrap();
    let (secrets, provider) = secrets_provider(env).await;
    let running = start(env, SecretsExecRetry, provider, dir.path()).await;
    create_spread(env, "spread-exec-retry", "web").await;
    let child = "web-secrets-exec-retry";
    wait_child(env, "cluster-a", child, true).await;
    let kubeconfig = exec_kubeconfig(env, dir.path(), &token, Some(&down));
    let secret = member_secret(SECRET, Some(MEMBER), &kubeconfig);
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    // The plugin fails: the member is reported by the plugin's exit status, and holds no child.
    let reason = member_status(&running, "failing").await;
    assert!(reason.contains("exit status: 3"), "{reason}");
    assert!(!has_child(env, MEMBER, child).await);

    // Its token server is back; nothing else changes (the Secret, the manager): the member joins.
    std::fs::remove_file(&down).unwrap();
    wait_child(env, MEMBER, child, true).await;
    member_status(&running, "ready").await;
    crate::support::stop(running).await;
}
