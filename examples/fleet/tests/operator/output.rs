//! What `fleet run` lets out, read as an SRE would, when credentials are wrong: every output (log, probes,
//! status, Events) names the problem and never repeats a byte of a credential. (Its log while a cluster is
//! down: `cluster_down`.)

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{WAIT, stage};
use kube::api::Api;
use kubeplex_fleet::AppDeployment;
use kubeplex_testenv::http_get;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");
/// `fleet run` as a user starts it, its stderr collected line by line.
pub(crate) struct Operator {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Operator {
    /// `fleet run` with these further flags.
    pub(crate) fn start_with(
        kubeconfig: &Path,
        probes: &str,
        rust_log: Option<&str>,
        flags: &[String],
    ) -> Self {
        let mut command = Command::new(FLEET);
        command
            .args(["run", "--probe-address", probes])
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("FLEET_LOG_FORMAT");
        if let Some(filter) = rust_log {
            command.env("RUST_LOG", filter);
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on the probe server: the status code and the body (`0` and empty when nothing answers, as
/// before the server listens).
async fn get(port: u16, path: &str) -> (u16, String) {
    let response = http_get(("127.0.0.1", port), path).await;
    response.map_or((0, String::new()), |r| (r.code, r.body))
}

/// Every credential of `kubeconfig`, in the forms it could leak in: as written (base64) and decoded.
fn credentials(kubeconfig: &kube::config::Kubeconfig) -> Vec<String> {
    use base64::Engine as _;
    let mut secrets = Vec::new();
    for entry in &kubeconfig.auth_infos {
        let value = serde_json::to_value(&entry.auth_info).unwrap();
        for field in [
            "client-key-data",
            "client-certificate-data",
            "token",
            "password",
        ] {
            let Some(text) = value[field].as_str() else {
                continue;
            };
            secrets.push(text.to_owned());
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(text)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok());
            // The PEM body lines: any one of them in an output is a leak.
            for line in decoded.iter().flat_map(|d| d.lines()) {
                if line.len() >= 40 && !line.starts_with("-----") {
                    secrets.push(line.to_owned());
                }
            }
        }
    }
    secrets
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_credentials_are_named_and_no_output_repeats_a_credential() {
    use std::os::unix::fs::PermissionsExt as _;
    const PLUGIN_SECRET: &str = "exec-plugin-s3cr3t-91c2";

    let stage = stage("output").await;
    let env = stage.env;
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("get-token");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho '{{\"status\":{{\"token\":\"{PLUGIN_SECRET}\"}}}}'\necho 'could not refresh {PLUGIN_SECRET}' >&2\nexit 1\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    // First a credential plugin that fails for cluster-b: no client can be configured, so a required
    // context is missing and the operator stops at once, saying why.
    let mut with_plugin = env.kubeconfig().clone();
    kubeplex_testenv::set_user(
        &mut with_plugin,
        "cluster-b",
        serde_json::json!({ "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": plugin.to_string_lossy(),
            "interactiveMode": "Never",
        }}),
    );
    // Then a token cluster-a rejects: the operator runs, and says so in probes, status and log.
    let rejected = env
        .kubeconfig_with("cluster-a", kubeplex_testenv::Credential::Invalid)
        .unwrap();
    let mut secrets = credentials(env.kubeconfig());
    secrets.extend(credentials(&rejected));
    secrets.push(PLUGIN_SECRET.to_owned());
    assert!(
        secrets
            .iter()
            .any(|s| s == "kubeplex-testenv-invalid-token")
    );
    let write = |name: &str, kubeconfig: &kube::config::Kubeconfig| {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_saphyr::to_string(kubeconfig).unwrap()).unwrap();
        path
    };
    let (with_plugin, rejected) = (write("plugin", &with_plugin), write("rejected", &rejected));

    let mut all = Vec::new();
    let stopped = kubeplex_testenv::output_within(
        Command::new(FLEET)
            .args(["run", "--probe-address", "127.0.0.1:0"])
            .args(stage.run_flags())
            .env("KUBECONFIG", &with_plugin)
            .env("RUST_LOG", "debug"),
        WAIT,
    );
    let said = String::from_utf8_lossy(&stopped.stderr).into_owned();
    assert!(!stopped.status.success(), "{said}");
    assert!(
        said.contains("cluster-b") && said.contains("credential plugin"),
        "the failing plugin is not named: {said}"
    );
    all.push(("the log of a start that failed".to_owned(), said));
    all.push((
        "stdout of a start that failed".to_owned(),
        String::from_utf8_lossy(&stopped.stdout).into_owned(),
    ));

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // As verbose as a user debugging would make it.
    let probes = format!("127.0.0.1:{port}");
    let operator = Operator::start_with(&rejected, &probes, Some("debug"), &stage.run_flags());
    let deadline = tokio::time::Instant::now() + WAIT;
    let startup = loop {
        let (_, body) = get(port, "/startupz?verbose").await;
        if body.contains("credentials were rejected") {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the probe never named the rejected credentials: {body}\n{}",
            operator.lines().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    stage.apply("web", "nginx:1.27", 1).await;
    // The parent's status names both failing clusters once the operator has tried them.
    let apps = stage.apps().await;
    loop {
        let status = serde_json::to_string(&apps.get("web").await.unwrap().status).unwrap();
        if status.contains("credentials were rejected") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no status for the failing cluster: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    all.extend([
        ("/startupz".to_owned(), startup),
        ("/readyz".to_owned(), get(port, "/readyz?verbose").await.1),
        ("/livez".to_owned(), get(port, "/livez").await.1),
    ]);
    all.extend(outputs_of_cluster(&stage.control().await, &stage.parents).await);
    let log = operator.lines().join("\n");
    drop(operator);
    assert!(
        log.contains("cluster-a"),
        "the log never names cluster-a:\n{log}"
    );
    all.push(("the log (RUST_LOG=debug)".to_owned(), log));
    for (what, text) in &all {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{what} repeats a credential ({}…):\n{text}",
                &secret[..8.min(secret.len())]
            );
        }
    }
}

/// What the control cluster holds about the parents in `namespace`: their statuses and Events.
async fn outputs_of_cluster(control: &kube::Client, namespace: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::events::v1::Event;
    let apps: Api<AppDeployment> = Api::namespaced(control.clone(), namespace);
    let events: Api<Event> = Api::namespaced(control.clone(), namespace);
    let list = kube::api::ListParams::default();
    vec![
        (
            "AppDeployment statuses".to_owned(),
            serde_json::to_string(&apps.list(&list).await.unwrap().items).unwrap(),
        ),
        (
            "Events".to_owned(),
            serde_json::to_string(&events.list(&list).await.unwrap().items).unwrap(),
        ),
    ]
}
