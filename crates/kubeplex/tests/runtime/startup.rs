//! The startup probe names the context and the cause when a context cannot be used.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    Fleet, WAIT, create_namespace, probe, probe_until, reasons, wait_context_status, wait_started,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResource;
use kube::CustomResourceExt;
use kubeplex::{Action, Context, Controller, Cx, Error, Manager, Plan, Reconcile, Running};
use kubeplex_testenv::{Credential, TestEnv};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A kind installed in `control` and `cluster-a` only.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Widget",
    namespaced
)]
pub struct WidgetSpec {
    size: i32,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Widget::crd()), ("cluster-a", Widget::crd())]).await
}

struct Widgets;
impl Controller for Widgets {
    type Resource = Widget;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("widgets")
            .with_contexts([Fleet::ClusterA, Fleet::ClusterB])
            .with_namespaces(["widgets"])
    }
}
impl Reconcile for Widgets {
    type Error = Infallible;
    async fn reconcile(&self, _: Arc<Widget>, _: &Cx<Fleet>) -> Result<Action, Infallible> {
        Ok(Action::await_change())
    }
}

struct ConfigMaps;
impl Controller for ConfigMaps {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("config-maps")
            .with_contexts([Fleet::ClusterA, Fleet::ClusterB])
            .with_namespaces(["perm-1"])
    }
}
impl Reconcile for ConfigMaps {
    type Error = Infallible;
    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Infallible> {
        Ok(Action::await_change())
    }
}

async fn start(manager: Manager) -> (Running, std::net::SocketAddr) {
    let running = manager.probes("127.0.0.1:0").start().await.unwrap();
    let address = running.probe_address().unwrap();
    (running, address)
}

#[tokio::test]
async fn a_context_missing_from_the_kubeconfig_is_named_by_the_probe_and_the_start_error() {
    let env = env().await;
    let manager = || {
        Manager::with_kubeconfig(env.kubeconfig().clone())
            .context_alias(Fleet::ClusterB, "cluster-z")
            .controller(ConfigMaps)
    };
    let (running, address) = start(manager()).await;
    let error = running.wait_started().await.unwrap_err();
    assert!(matches!(error, Error::Startup { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("context cluster-b") && message.contains("\"cluster-z\""),
        "{message}"
    );
    assert!(
        message.contains("control, cluster-a, cluster-b"),
        "lists the contexts it has: {message}"
    );

    let (status, body) = probe(address, "/startupz").await;
    assert_eq!(status, 503, "{body:#}");
    assert!(
        reasons(&body, "cluster-b").contains("has no context \"cluster-z\""),
        "{body:#}"
    );
    crate::support::stop(running).await;

    let run = manager().run().await.unwrap_err().to_string();
    assert!(
        run.contains("context cluster-b") && run.contains("cluster-z"),
        "{run}"
    );
}

#[tokio::test]
async fn a_kind_not_served_in_one_context_is_named_with_the_context() {
    let env = env().await;
    for cluster in ["cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), "widgets").await;
    }
    let (running, address) =
        start(Manager::with_kubeconfig(env.kubeconfig().clone()).controller(Widgets)).await;
    let body = probe_until(address, "/startupz", 503, WAIT).await;
    let body = wait_reason(address, "cluster-b", "is not served", body).await;
    assert!(
        reasons(&body, "cluster-b")
            .contains("cluster cluster-b: kind Widget.test.kubeplex.dev/v1 is not served"),
        "{body:#}"
    );
    wait_context_status(address, "/startupz", "cluster-a", "ready").await;
    assert_eq!(
        running.readiness().clusters["cluster-b"].status,
        kubeplex::readiness::ClusterReadiness::Failing
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn missing_permissions_and_rejected_credentials_are_named_without_revealing_them() {
    let env = env().await;
    for cluster in ["cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), "perm-1").await;
    }
    let forbidden = env
        .kubeconfig_with("cluster-b", Credential::NoPermissions)
        .unwrap();
    let (running, address) =
        start(Manager::with_kubeconfig(forbidden).controller(ConfigMaps)).await;
    let body = wait_reason(address, "cluster-b", "403", serde_json::Value::Null).await;
    assert!(
        reasons(&body, "cluster-b")
            .contains("cluster cluster-b: user may not list configmaps in namespace perm-1"),
        "{body:#}"
    );
    assert_eq!(probe(address, "/startupz").await.0, 503);
    crate::support::stop(running).await;

    let rejected = env
        .kubeconfig_with("cluster-b", Credential::Invalid)
        .unwrap();
    let (running, address) = start(Manager::with_kubeconfig(rejected).controller(ConfigMaps)).await;
    let body = wait_reason(address, "cluster-b", "401", serde_json::Value::Null).await;
    assert!(
        reasons(&body, "cluster-b").contains("credentials were rejected (401 Unauthorized)"),
        "{body:#}"
    );
    let text = body.to_string();
    for secret in [
        "kubeplex-testenv-invalid-token",
        "PRIVATE KEY",
        "BEGIN CERTIFICATE",
    ] {
        assert!(
            !text.contains(secret),
            "the probe body reveals a credential: {text}"
        );
    }
    assert_eq!(probe(address, "/startupz").await.0, 503);
    assert_eq!(
        probe(address, "/livez").await.0,
        200,
        "a remote failure is not a reason to restart"
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn startup_succeeds_once_every_context_is_ready() {
    let env = env().await;
    for cluster in ["cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), "perm-1").await;
    }
    let (running, address) =
        start(Manager::with_kubeconfig(env.kubeconfig().clone()).controller(ConfigMaps)).await;
    wait_started(&running, "started in time").await;
    let body = probe_until(address, "/startupz", 200, WAIT).await;
    for context in [Fleet::ClusterA, Fleet::ClusterB] {
        assert_eq!(
            body["clusters"][context.name()]["status"],
            "ready",
            "{body:#}"
        );
        assert_eq!(
            body["clusters"][context.name()]["watches"][0]["synced"],
            true,
            "{body:#}"
        );
    }
    assert_eq!(probe(address, "/readyz").await.0, 200);
    assert_eq!(probe(address, "/nope").await.0, 404);
    crate::support::stop(running).await;
}

/// Polls `/startupz` until a reason of `context` contains `needle`.
async fn wait_reason(
    address: std::net::SocketAddr,
    context: &str,
    needle: &str,
    mut last: serde_json::Value,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !reasons(&last, context).contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reason with {needle:?} for {context}: {last:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = probe(address, "/startupz").await.1;
    }
    last
}

#[tokio::test]
async fn an_optional_context_is_reported_but_does_not_hold_back_startup() {
    let env = env().await;
    for cluster in ["cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), "perm-1").await;
    }
    let manager = Manager::with_kubeconfig(env.kubeconfig().clone())
        .context_alias(Fleet::ClusterB, "cluster-z")
        .optional(Fleet::ClusterB)
        .controller(ConfigMaps);
    let (running, address) = start(manager).await;
    wait_started(&running, "started without cluster-b").await;
    let body = probe_until(address, "/startupz", 200, WAIT).await;
    assert_eq!(body["clusters"]["cluster-b"]["required"], false, "{body:#}");
    assert_eq!(
        body["clusters"]["cluster-b"]["status"], "failing",
        "{body:#}"
    );
    assert!(
        reasons(&body, "cluster-b").contains("cluster-z"),
        "{body:#}"
    );
    assert_eq!(body["clusters"]["cluster-a"]["status"], "ready", "{body:#}");
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_server_certificate_the_kubeconfig_does_not_trust_is_named_as_such() {
    let env = env().await;
    create_namespace(&env.client("cluster-a").await.unwrap(), "perm-1").await;
    create_namespace(&env.client("cluster-b").await.unwrap(), "perm-1").await;
    // cluster-b's server is checked against another cluster's CA.
    let mut untrusting = env.kubeconfig().clone();
    let ca_of = |kubeconfig: &kube::config::Kubeconfig, name: &str| {
        kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.clone())
            .unwrap()
    };
    let wrong_ca = ca_of(&untrusting, "cluster-a").certificate_authority_data;
    for cluster in untrusting
        .clusters
        .iter_mut()
        .filter(|c| c.name == "cluster-b")
    {
        cluster.cluster.as_mut().unwrap().certificate_authority_data = wrong_ca.clone();
    }
    let (running, address) =
        start(Manager::with_kubeconfig(untrusting).controller(ConfigMaps)).await;
    let body = wait_reason(
        address,
        "cluster-b",
        "untrusted server",
        serde_json::Value::Null,
    )
    .await;
    let reasons = reasons(&body, "cluster-b");
    assert!(
        reasons.contains("cluster cluster-b: untrusted server: its certificate is not trusted with the kubeconfig's CA"),
        "{body:#}"
    );
    assert!(
        !reasons.contains("unreachable"),
        "a TLS failure is not an unreachable cluster: {reasons}"
    );
    crate::support::stop(running).await;
}

/// A credential plugin (`users[].user.exec`) whose output carries a token and that fails: by exiting non-zero
/// (kube's error embeds its stdout and stderr) or by printing what is not an ExecCredential (the parser quotes
/// it). Neither the probe body nor the start error may repeat a byte of that output.
#[cfg(unix)]
#[tokio::test]
async fn a_failing_credential_plugin_is_named_without_its_output() {
    use std::os::unix::fs::PermissionsExt as _;

    const SECRET: &str = "exec-plugin-s3cr3t-7f3a";
    let env = env().await;
    for cluster in ["cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), "perm-1").await;
    }
    let dir = tempfile::tempdir().unwrap();
    let plugin = |name: &str, script: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    };
    let exits_non_zero = plugin(
        "fails",
        format!(
            "echo '{{\"status\":{{\"token\":\"{SECRET}\"}}}}'\necho 'refresh of {SECRET} failed' >&2\nexit 3"
        ),
    );
    let prints_garbage = plugin("garbage", format!("echo 'token: {SECRET}\n  : ['"));
    let mut kubeconfig = env.kubeconfig().clone();
    for (context, command) in [("cluster-a", prints_garbage), ("cluster-b", exits_non_zero)] {
        let exec = serde_json::json!({
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": command,
                "interactiveMode": "Never",
            }
        });
        kubeplex_testenv::set_user(&mut kubeconfig, context, exec);
    }
    let (running, address) =
        start(Manager::with_kubeconfig(kubeconfig).controller(ConfigMaps)).await;
    let body = wait_reason(
        address,
        "cluster-b",
        "credential plugin",
        serde_json::Value::Null,
    )
    .await;
    let body = wait_reason(address, "cluster-a", "credential plugin", body).await;
    assert!(
        reasons(&body, "cluster-b").contains("failed (exit status: 3)"),
        "{body:#}"
    );
    assert!(
        reasons(&body, "cluster-a").contains("not an ExecCredential"),
        "{body:#}"
    );
    let text = body.to_string();
    assert!(
        !text.contains(SECRET),
        "the probe body repeats the plugin's output: {text}"
    );
    assert_eq!(probe(address, "/startupz").await.0, 503);
    crate::support::stop(running).await;
}
