//! A `fleet run --leader-election` (or `--shards`) process of the HA tests, its probes and log, and the tests' polling.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kubeplex_testenv::{Polling, TestEnv, try_eventually};

use crate::TIMINGS;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");
/// The manager's line once its probe server listens (`fleet run --probe-address 127.0.0.1:0`).
const SERVING: &str = "serving /startupz";
/// The runtime's line once its webhook server listens (`fleet run --webhook-port 0`).
const SERVING_WEBHOOKS: &str = "serving webhooks over HTTPS";

/// A replica's Lease timings, passed as `fleet run`'s flags.
#[derive(Clone, Copy)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Timings {
    /// The runtime's defaults (client-go's), what a deployment runs.
    pub const DEFAULT: Self = Self {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    /// How long a takeover after a SIGKILL may take: it needs at most a lease duration and two retry
    /// periods (docs/ha.md); five times that, for a loaded 2-core machine.
    pub fn failover_bound(self) -> Duration {
        let needed = self.lease_duration + self.retry_period * 2;
        needed * 5
    }

    fn flags(self) -> [String; 6] {
        let seconds = |d: Duration| d.as_secs_f64().to_string();
        [
            "--lease-duration".into(),
            seconds(self.lease_duration),
            "--renew-deadline".into(),
            seconds(self.renew_deadline),
            "--retry-period".into(),
            seconds(self.retry_period),
        ]
    }
}

/// One `fleet run --leader-election` process, its log collected.
pub struct Replica {
    pub identity: String,
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// Where its probes listen, from its log: it binds port 0 itself, so no other process can take the
    /// port between a choice and the bind.
    probes: Arc<OnceLock<SocketAddr>>,
    /// Where its webhooks listen, from its log likewise (with `--webhook-port 0`).
    webhooks: Arc<OnceLock<SocketAddr>>,
}

impl Replica {
    pub fn start(env: &TestEnv, namespace: &str, identity: &str) -> Self {
        Self::start_with(env.kubeconfig_path(), namespace, identity)
    }

    pub fn start_with(kubeconfig: &std::path::Path, namespace: &str, identity: &str) -> Self {
        Self::spawn(
            kubeconfig,
            namespace,
            identity,
            TIMINGS,
            &["--leader-election"],
        )
    }

    /// [`start`](Self::start) with `timings` instead of the tests' short ones.
    pub fn start_timed(env: &TestEnv, namespace: &str, identity: &str, timings: Timings) -> Self {
        let kubeconfig = env.kubeconfig_path();
        Self::spawn(
            kubeconfig,
            namespace,
            identity,
            timings,
            &["--leader-election"],
        )
    }

    /// [`start`](Self::start) serving the admission webhooks too, on a port of its choosing
    /// ([`webhook_port`](Self::webhook_port)).
    pub fn start_with_webhooks(env: &TestEnv, namespace: &str, identity: &str) -> Self {
        let mode = ["--leader-election", "--webhook-port", "0"];
        Self::spawn(env.kubeconfig_path(), namespace, identity, TIMINGS, &mode)
    }

    /// A replica of `fleet run --shards SHARDS` instead.
    pub fn start_sharded(env: &TestEnv, namespace: &str, identity: &str, shards: u16) -> Self {
        Self::start_sharded_with(env.kubeconfig_path(), namespace, identity, shards)
    }

    /// [`start_sharded`](Self::start_sharded) with `timings` instead of the tests' short ones.
    pub fn start_sharded_timed(
        env: &TestEnv,
        namespace: &str,
        identity: &str,
        shards: u16,
        timings: Timings,
    ) -> Self {
        let mode = ["--shards".to_owned(), shards.to_string()];
        let kubeconfig = env.kubeconfig_path();
        Self::spawn(kubeconfig, namespace, identity, timings, &mode)
    }

    pub fn start_sharded_with(
        kubeconfig: &std::path::Path,
        namespace: &str,
        identity: &str,
        shards: u16,
    ) -> Self {
        let mode = ["--shards".to_owned(), shards.to_string()];
        Self::spawn(kubeconfig, namespace, identity, TIMINGS, &mode)
    }

    fn spawn(
        kubeconfig: &std::path::Path,
        namespace: &str,
        identity: &str,
        timings: Timings,
        mode: &[impl AsRef<std::ffi::OsStr>],
    ) -> Self {
        let mut child = Command::new(FLEET)
            .arg("run")
            .args(mode)
            .args(timings.flags())
            .args(["--identity", identity])
            .args(["--probe-address", "127.0.0.1:0"])
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
        let (probes, webhooks) = (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
        let (sink, bound, hooks) = (log.clone(), probes.clone(), webhooks.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(address) = address_in(&line, SERVING) {
                    let _ = bound.set(address);
                }
                if let Some(address) = address_in(&line, SERVING_WEBHOOKS) {
                    let _ = hooks.set(address);
                }
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            identity: identity.to_owned(),
            child,
            log,
            probes,
            webhooks,
        }
    }

    /// The port its webhooks listen on; `None` before they serve.
    pub fn webhook_port(&self) -> Option<u16> {
        self.webhooks.get().map(SocketAddr::port)
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
        let body = self.readyz().await?;
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
        let body = self.readyz().await?;
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

    /// The body of `/readyz?verbose` (from loopback: the whole report); `None` before the probe server
    /// listens and while it does not answer (in 2 s).
    async fn readyz(&self) -> Option<String> {
        let address = *self.probes.get()?;
        let get = kubeplex_testenv::http_get(address, "/readyz?verbose");
        let response = tokio::time::timeout(Duration::from_secs(2), get)
            .await
            .ok()?;
        response.ok().map(|r| r.body)
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
        // SIGKILL ends a replica frozen with SIGSTOP too (a test that failed before its SIGCONT).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the line that a server listens (`… serving /startupz … address=127.0.0.1:41234`), if
/// `line` is the one that says `serving`.
fn address_in(line: &str, serving: &str) -> Option<SocketAddr> {
    if !line.contains(serving) {
        return None;
    }
    let value = line.split_once("address=")?.1;
    value.split_whitespace().next()?.parse().ok()
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
