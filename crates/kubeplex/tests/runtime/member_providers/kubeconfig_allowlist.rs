//! Member kubeconfigs are untrusted input: Secrets whose kubeconfig would run a command (`exec`, the gcp
//! auth-provider's `cmd-path`), send a local file's token to the server it names (`tokenFile`), or
//! authenticate with local certificate files are refused, each naming the field in `/readyz`: no command
//! runs, the server never hears from the operator, and the member never joins; a member with inline
//! credentials, added after them, joins. The same holds for Cluster API's `<cluster>-kubeconfig` Secrets.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubeplex::prelude::*;
use kubeplex::{members::LeavePolicy, readiness::MemberPhase};
use kubeplex_testenv::TestEnv;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use super::accounts::{MEMBER, account_token, admin_kubeconfig, text, token_kubeconfig};
use super::cluster_api::capi_secret;
use super::{member_secret, secrets_provider, start};
use crate::spread::{Spread, create_spread, spreader, wait_child};
use crate::support::{Fleet, reasons, wait_context_status};

spreader!(Untrusted, "spread-untrusted");
spreader!(UntrustedCapi, "spread-untrusted-capi");

/// The token in the local file a `tokenFile` names: the listener must never see it.
const TOKEN_IN_FILE: &str = "operator-local-token-5c1e9a";

/// A TCP listener posing as a member's API server (plain HTTP, so a bearer token would arrive
/// readable): records every byte any connection sends, and stays bound while the test runs.
struct FakeServer {
    url: String,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let record = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let record = record.clone();
                tokio::spawn(async move {
                    let index = {
                        let mut all = record.lock();
                        all.push(Vec::new());
                        all.len() - 1
                    };
                    let mut buffer = [0u8; 4096];
                    while let Ok(read @ 1..) = stream.read(&mut buffer).await {
                        record.lock()[index].extend_from_slice(&buffer[..read]);
                    }
                });
            }
        });
        Self {
            url,
            received,
            task,
        }
    }
}

/// A credential plugin in `dir` that creates the file `ran-<its first argument>` there, then prints an
/// ExecCredential with `token` (as an exec plugin and as the gcp auth-provider's command would).
fn plugin(dir: &Path, token: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let plugin = dir.join("plugin");
    let script = format!(
        "#!/bin/sh\ntouch '{}'/ran-\"$1\"\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
         \"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n",
        dir.display()
    );
    std::fs::write(&plugin, script).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    plugin.to_string_lossy().into_owned()
}

/// cluster-c's kubeconfig (a token one, its user then replaced by `user`), with `server` if given.
fn kubeconfig(env: &TestEnv, user: Value, server: Option<&str>) -> String {
    let mut kubeconfig = token_kubeconfig(env, "replaced");
    kubeplex_testenv::set_user(&mut kubeconfig, MEMBER, user);
    if let Some(server) = server {
        let cluster = kubeconfig.clusters[0].cluster.as_mut().unwrap();
        cluster.server = Some(server.to_owned());
    }
    text(&kubeconfig)
}

/// cluster-c's admin client certificate and key, written to files in `dir`; their paths.
fn admin_certificate_files(env: &TestEnv, dir: &Path) -> (String, String) {
    let admin = admin_kubeconfig(env);
    let user = serde_json::to_value(&admin.auth_infos[0].auth_info).unwrap();
    let decode = |field: &str| {
        let data = user[field].as_str().unwrap();
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap()
    };
    let (certificate, key) = (dir.join("admin.crt"), dir.join("admin.key"));
    std::fs::write(&certificate, decode("client-certificate-data")).unwrap();
    std::fs::write(&key, decode("client-key-data")).unwrap();
    let path = |p: &Path| p.to_string_lossy().into_owned();
    (path(&certificate), path(&key))
}

#[tokio::test]
async fn member_secrets_that_would_run_commands_or_read_local_files_are_refused_naming_the_field() {
    let env = super::env().await;
    let accounts = env.create_namespace(&[MEMBER], "untrusted").await.unwrap();
    // A token cluster-c accepts: were a plugin run, its member would work.
    let token = account_token(env, &accounts, "untrusted").await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), &token);
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN_IN_FILE).unwrap();
    let (certificate, key) = admin_certificate_files(env, dir.path());
    let server = FakeServer::start().await;

    let (secrets, provider) = secrets_provider(env).await;
    let namespace = secrets.namespace().unwrap_or_default().to_owned();
    let running = start(env, Untrusted, provider, LeavePolicy::Orphan).await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-untrusted", "web").await;
    let child = "web-untrusted";
    wait_child(env, "cluster-a", child, true).await;

    // Each member, the kubeconfig its Secret holds, and the field its refusal must name.
    let exec = json!({ "exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "args": ["exec"],
        "interactiveMode": "Never" } });
    let gcp = json!({ "auth-provider": { "name": "gcp", "config": {
        "cmd-path": plugin, "cmd-args": "gcp", "token-key": "{.status.token}" } } });
    let from_file = json!({ "tokenFile": token_file.to_string_lossy() });
    let cert_files = json!({ "client-certificate": certificate, "client-key": key });
    let refused = [
        (
            "cluster-c-exec",
            kubeconfig(env, exec, None),
            "the user's exec (",
        ),
        (
            "cluster-c-gcp",
            kubeconfig(env, gcp, None),
            "the user's auth-provider (",
        ),
        (
            "cluster-c-token-file",
            kubeconfig(env, from_file, Some(&server.url)),
            "the user's tokenFile (",
        ),
        (
            "cluster-c-cert-files",
            kubeconfig(env, cert_files, None),
            "the user's client-certificate (",
        ),
    ];
    let params = PostParams::default();
    for (member, kubeconfig, _) in &refused {
        let secret = member_secret(member, Some(member), kubeconfig);
        secrets.create(&params, &secret).await.unwrap();
    }
    for (member, _, field) in &refused {
        let ready = wait_context_status(address, "/readyz", member, "failing").await;
        let reason = reasons(&ready, member);
        let expected = format!("member {member}: Secret {namespace}/{member}: context {MEMBER}: ");
        assert!(reason.starts_with(&expected), "{reason}");
        assert!(reason.contains(field), "{member}: {reason}");
        assert!(reason.ends_with("see docs/fleets.md"), "{reason}");
        for value in [&token, TOKEN_IN_FILE, &dir.path().to_string_lossy()] {
            assert!(
                !reason.contains(value),
                "{member}'s reason shows a value: {reason}"
            );
        }
    }
    // Both certificate files are named.
    let ready = wait_context_status(address, "/readyz", "cluster-c-cert-files", "failing").await;
    let reason = reasons(&ready, "cluster-c-cert-files");
    assert!(reason.contains("the user's client-key ("), "{reason}");

    // A member with inline credentials, added after them, joins and gets its child: the Secrets before it
    // were handled, and anything they started had its chance.
    let good = member_secret(MEMBER, Some(MEMBER), &text(&admin_kubeconfig(env)));
    secrets.create(&params, &good).await.unwrap();
    wait_child(env, MEMBER, child, true).await;
    super::member_status(&running, "ready").await;
    super::unreachable::wait_state(env, "spread-untrusted", MEMBER, "Applied").await;

    for ran in ["ran-exec", "ran-gcp"] {
        assert!(
            !dir.path().join(ran).exists(),
            "a member's command ran: {ran}"
        );
    }
    let received = server.received.lock().clone();
    assert!(
        received.is_empty(),
        "the member's server was contacted {} times{}",
        received.len(),
        match received.iter().any(|r| r
            .windows(TOKEN_IN_FILE.len())
            .any(|w| w == TOKEN_IN_FILE.as_bytes()))
        {
            true => ", with the local file's token",
            false => "",
        }
    );
    // None of them joined: each is still joining, and no parent counts it among its clusters.
    let report = running.readiness();
    let parents: Api<Spread> =
        Api::namespaced(env.client("control").await.unwrap(), "spread-untrusted");
    let status = parents.get("web").await.unwrap().status.unwrap_or_default();
    for (member, _, _) in &refused {
        let phase = report.clusters.get(*member).and_then(|c| c.member.clone());
        assert_eq!(
            phase.map(|p| p.phase),
            Some(MemberPhase::Joining),
            "{member}"
        );
        assert!(!status.fleet.clusters.contains_key(*member), "{status:#?}");
    }
    server.task.abort();
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_cluster_api_kubeconfig_secret_that_would_run_a_command_is_refused_until_it_is_inline() {
    let env = super::env().await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), "unused");
    let namespace = env
        .create_namespace(&["control"], "capi-untrusted")
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client("control").await.unwrap(), &namespace);
    let provider = kubeplex::members::KubeconfigSecrets::cluster_api(Fleet::Control, &namespace);
    let running = start(env, UntrustedCapi, provider, LeavePolicy::Orphan).await;
    let address = running.probe_address().unwrap();
    create_spread(env, "spread-untrusted-capi", "web").await;
    let child = "web-untrusted-capi";
    wait_child(env, "cluster-a", child, true).await;

    let exec = json!({ "exec": { "command": plugin, "args": ["capi"] } });
    let secret = capi_secret(
        "cluster-c-kubeconfig",
        "cluster.x-k8s.io/secret",
        &kubeconfig(env, exec, None),
    );
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let ready = wait_context_status(address, "/readyz", MEMBER, "failing").await;
    let reason = reasons(&ready, MEMBER);
    assert!(reason.contains("the user's exec (a command)"), "{reason}");
    assert!(!reason.contains(&*dir.path().to_string_lossy()), "{reason}");

    // Its credentials put inline: it joins and gets its child; the command never ran.
    let inline = json!({ "stringData": { "value": text(&admin_kubeconfig(env)) } });
    let params = PatchParams::default();
    let patch = Patch::Merge(&inline);
    secrets
        .patch("cluster-c-kubeconfig", &params, &patch)
        .await
        .unwrap();
    wait_child(env, MEMBER, child, true).await;
    assert!(
        !dir.path().join("ran-capi").exists(),
        "the member's command ran"
    );
    crate::support::stop(running).await;
}
