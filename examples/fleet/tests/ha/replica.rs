//! A `fleet run --leader-election` (or `--shards`) process of the HA tests, its probes and log, and the tests' polling.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubeplex_testenv::{Polling, TestEnv, try_eventually};

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");

/// One `fleet run --leader-election` process, its log collected.
pub struct Replica {
    pub identity: String,
    pub port: u16,
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    pub fn start(env: &TestEnv, namespace: &str, identity: &str) -> Self {
        Self::start_with(env.kubeconfig_path(), namespace, identity)
    }

    pub fn start_with(kubeconfig: &std::path::Path, namespace: &str, identity: &str) -> Self {
        Self::spawn(kubeconfig, namespace, identity, &["--leader-election"])
    }

    /// A replica of `fleet run --shards SHARDS` instead.
    pub fn start_sharded(env: &TestEnv, namespace: &str, identity: &str, shards: u16) -> Self {
        Self::start_sharded_with(env.kubeconfig_path(), namespace, identity, shards)
    }

    pub fn start_sharded_with(
        kubeconfig: &std::path::Path,
        namespace: &str,
        identity: &str,
        shards: u16,
    ) -> Self {
        let mode = ["--shards".to_owned(), shards.to_string()];
        Self::spawn(kubeconfig, namespace, identity, &mode)
    }

    fn spawn(
        kubeconfig: &std::path::Path,
        namespace: &str,
        identity: &str,
        mode: &[impl AsRef<std::ffi::OsStr>],
    ) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(FLEET)
            .arg("run")
            .args(mode)
            .args(["--identity", identity])
            .args(["--probe-address", &format!("127.0.0.1:{port}")])
            .args(["--namespace", namespace, "--child-namespaces", namespace])
            .args(["--lease-namespace", namespace])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn,kubeplex=info")
            .env_remove("FLEET_LOG_FORMAT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            identity: identity.to_owned(),
            port,
            child,
            log,
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.identity);
    }

    /// `leadership.role` and `.holder` of `/readyz`; `None` while it does not answer (in time).
    pub async fn role(&self) -> Option<(String, String)> {
        let body = tokio::time::timeout(Duration::from_secs(2), readyz(self.port))
            .await
            .ok()??;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        // None before the election has started.
        let leadership = json.get("leadership")?;
        assert_eq!(leadership["identity"], self.identity.as_str(), "{json}");
        Some((
            leadership["role"].as_str()?.to_owned(),
            leadership["holder"].as_str().unwrap_or_default().to_owned(),
        ))
    }

    /// `sharding.members` and `.shards` of `/readyz`; `None` while it does not answer (in time).
    pub async fn shards(&self) -> Option<(Vec<String>, Vec<String>)> {
        let body = tokio::time::timeout(Duration::from_secs(2), readyz(self.port))
            .await
            .ok()??;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let sharding = json.get("sharding")?;
        assert_eq!(sharding["identity"], self.identity.as_str(), "{json}");
        let list = |key: &str| -> Vec<String> {
            let items = sharding[key].as_array().into_iter().flatten();
            items
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        Some((list("members"), list("shards")))
    }

    pub fn log(&self) -> String {
        format!(
            "--- {}:\n{}",
            self.identity,
            self.log.lock().unwrap().join("\n")
        )
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The body of `/readyz?verbose` (from loopback: the whole report); `None` while it does not answer.
async fn readyz(port: u16) -> Option<String> {
    let response = crate::support::http::http_get(("127.0.0.1", port), "/readyz?verbose").await;
    response.ok().map(|r| r.body)
}

pub fn logs(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| r.log())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls `check` every 200 ms until it gives a value; panics naming `what`, its last complaint and the
/// replicas' logs after `within`.
pub async fn until<T>(
    what: &str,
    within: Duration,
    replicas: &[&Replica],
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let polling = Polling::within(within).every(Duration::from_millis(200));
    match try_eventually(what, polling, check).await {
        Ok(value) => value,
        Err(timeout) => panic!("{timeout}\n{}", logs(replicas)),
    }
}
