//! `fleet run --leader-election` as separate processes on real clusters, judged from the API servers' own
//! audit logs (every request with its verb, object, time and `User-Agent`, which names the replica):
//! one of three replicas leads; a killed leader is replaced; a frozen and thawed leader writes nothing after
//! its lease deadline, anywhere; a leader cut off from the control cluster stops writing to the child
//! clusters it still reaches; a rolling replacement loses no change.
//!
//! The tests share one set of clusters, each in namespaces of its own (the parents', the Lease's and the
//! children's), so their replicas never meet. Timings are the defaults (lease 15 s, renew deadline 10 s,
//! retry 2 s): what a deployment runs.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kubeplex::Context as _;
use kubeplex_fleet::{AppDeployment, Fleet};
use kubeplex_testenv::{SharedTestEnv, TestEnv};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");
const WAIT: Duration = Duration::from_secs(60);
const LEASE: &str = "fleet-operator";
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// The bound for a takeover after a SIGKILL (a lease duration plus retries), plus slack for a loaded
/// 2-core machine; the measured time is printed.
const FAILOVER_BOUND: Duration = Duration::from_secs(30);
const CLUSTERS: [Fleet; 3] = [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB];
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

static ENV: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(CLUSTERS.map(|c| c.name()))
        .crd(Fleet::Control.name(), AppDeployment::installable_crd())
        .audit_log(true)
});

/// A namespace of its own in every cluster: the parents, the Lease and the children all go there.
async fn setup(prefix: &str) -> (&'static TestEnv, String, Client) {
    let env = ENV.get().await.unwrap();
    let namespace = env
        .create_namespace(&CLUSTERS.map(|c| c.name()), prefix)
        .await
        .unwrap();
    let control = env.client(Fleet::Control.name()).await.unwrap();
    (env, namespace, control)
}

/// One `fleet run --leader-election` process, its log collected.
struct Replica {
    identity: String,
    port: u16,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    fn start(env: &TestEnv, namespace: &str, identity: &str) -> Self {
        Self::start_with(env.kubeconfig_path(), namespace, identity)
    }

    fn start_with(kubeconfig: &std::path::Path, namespace: &str, identity: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(FLEET)
            .args(["run", "--leader-election", "--identity", identity])
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

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.identity);
    }

    /// `leadership.role` and `.holder` of `/readyz`; `None` while it does not answer (in time).
    async fn role(&self) -> Option<(String, String)> {
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

    fn log(&self) -> String {
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

async fn readyz(port: u16) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = "GET /readyz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

fn logs(replicas: &[&Replica]) -> String {
    replicas
        .iter()
        .map(|r| r.log())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls `check` every 200 ms until it gives a value; panics naming `what`, its last complaint and the
/// replicas' logs after `within`.
async fn until<T>(
    what: &str,
    within: Duration,
    replicas: &[&Replica],
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(complaint) if tokio::time::Instant::now() > deadline => {
                panic!(
                    "{what} (not within {within:?}): {complaint}\n{}",
                    logs(replicas)
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn holder(control: &Client, namespace: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(control.clone(), namespace)
        .get_opt(LEASE)
        .await
        .ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Waits until exactly one of `replicas` leads, the others stand by naming it, and the Lease agrees;
/// returns the leader's index.
async fn one_leader(control: &Client, namespace: &str, replicas: &[&Replica]) -> usize {
    until("exactly one leader", WAIT, replicas, async || {
        let mut roles = Vec::new();
        for replica in replicas {
            roles.push(
                replica
                    .role()
                    .await
                    .ok_or(format!("{} does not answer", replica.identity))?,
            );
        }
        let leaders: Vec<usize> = (0..roles.len())
            .filter(|&i| roles[i].0 == "leader")
            .collect();
        let [leader] = leaders[..] else {
            return Err(format!("roles {roles:?}"));
        };
        let name = &replicas[leader].identity;
        let agree = roles.iter().all(|(_, h)| h == name);
        let lease = holder(control, namespace).await;
        if agree && lease.as_deref() == Some(name) {
            Ok(leader)
        } else {
            Err(format!("roles {roles:?}, Lease held by {lease:?}"))
        }
    })
    .await
}

/// Creates or changes the parent `name` (server-side apply).
async fn apply(control: &Client, namespace: &str, name: &str, image: &str) {
    let api: Api<AppDeployment> = Api::namespaced(control.clone(), namespace);
    let object = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment",
        "metadata": { "name": name },
        "spec": { "image": image, "replicas": 1 },
    });
    api.patch(name, &PatchParams::apply("ha-test"), &Patch::Apply(&object))
        .await
        .unwrap();
}

/// Waits until both child clusters run `name` with `image`.
async fn converged(env: &TestEnv, namespace: &str, name: &str, image: &str, replicas: &[&Replica]) {
    let mut apis = Vec::new();
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        apis.push((cluster, Api::<Deployment>::namespaced(client, namespace)));
    }
    let what = format!("Deployment {namespace}/{name} with {image} in both child clusters");
    until(&what, WAIT, replicas, async || {
        for (cluster, api) in &apis {
            let found = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let has = found.as_ref().and_then(|d| {
                d.spec
                    .template
                    .spec
                    .as_ref()?
                    .containers
                    .first()?
                    .image
                    .clone()
            });
            if has.as_deref() != Some(image) {
                return Err(format!("{cluster}: {has:?}"));
            }
        }
        Ok(())
    })
    .await;
}

/// One request of the audit logs that changed (or tried to change) something.
#[derive(Debug)]
struct Write {
    cluster: Fleet,
    verb: String,
    what: String,
    at: Timestamp,
    code: i64,
}

/// Every write `identity` made, in any cluster, as the API servers recorded them (request received time).
fn writes_of(env: &TestEnv, identity: &str) -> Vec<Write> {
    let agent = format!("({identity})");
    let mut writes = Vec::new();
    for cluster in CLUSTERS {
        for event in env.audit_events(cluster.name()).unwrap() {
            let verb = event["verb"].as_str().unwrap_or_default();
            let by = event["userAgent"].as_str().unwrap_or_default();
            if !WRITE_VERBS.contains(&verb) || !by.ends_with(&agent) {
                continue;
            }
            let object = &event["objectRef"];
            let field = |k: &str| object[k].as_str().unwrap_or_default().to_owned();
            writes.push(Write {
                cluster,
                verb: verb.to_owned(),
                what: format!(
                    "{}{}{} {}/{}",
                    field("resource"),
                    if field("subresource").is_empty() {
                        ""
                    } else {
                        "/"
                    },
                    field("subresource"),
                    field("namespace"),
                    field("name")
                ),
                at: event["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
                code: event["responseStatus"]["code"].as_i64().unwrap_or_default(),
            });
        }
    }
    writes.sort_by_key(|w| w.at);
    writes
}

/// When `identity`'s fence closed at the latest: the last renewal of its Lease that the server accepted
/// (received time, after the replica took its send time) plus the renew deadline.
fn fence_deadline(writes: &[Write], namespace: &str) -> Timestamp {
    let lease = format!("leases {namespace}/{LEASE}");
    let renewed = writes
        .iter()
        .filter(|w| w.what == lease && (200..300).contains(&w.code))
        .map(|w| w.at)
        .max()
        .expect("the replica renewed its Lease at least once");
    renewed + RENEW_DEADLINE
}

/// The writes after `deadline`, as readable lines.
fn after(writes: &[Write], deadline: Timestamp) -> Vec<String> {
    writes
        .iter()
        .filter(|w| w.at > deadline)
        .map(|w| format!("{} {} {} {} -> {}", w.at, w.cluster, w.verb, w.what, w.code))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_one_leads_and_a_killed_leader_is_replaced_within_20_s() {
    let (env, ns, control) = setup("ha-kill").await;
    let mut replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start(env, &ns, &format!("kill-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let leader = one_leader(&control, &ns, &all).await;
    apply(&control, &ns, "before", "nginx:1.27").await;
    converged(env, &ns, "before", "nginx:1.27", &all).await;

    let killed = replicas.remove(leader);
    let killed_name = killed.identity.clone();
    let survivors: Vec<&Replica> = replicas.iter().collect();
    let started = tokio::time::Instant::now();
    drop(killed); // SIGKILL: the Lease is not released, it expires
    apply(&control, &ns, "after", "nginx:1.28").await;
    converged(env, &ns, "after", "nginx:1.28", &survivors).await;
    let failover = started.elapsed();
    eprintln!("SIGKILL of the leader -> a new parent's children in both clusters: {failover:?}");
    assert!(
        failover <= FAILOVER_BOUND,
        "failover took {failover:?} (bound {FAILOVER_BOUND:?})\n{}",
        logs(&survivors)
    );
    let next = one_leader(&control, &ns, &survivors).await;
    let next_name = &survivors[next].identity;
    let wrote = writes_of(env, next_name);
    assert!(
        wrote
            .iter()
            .any(|w| w.cluster != Fleet::Control && w.what == format!("deployments {ns}/after")),
        "the audit logs do not show {next_name} applying the new parent's children: {wrote:#?}"
    );
    assert!(
        writes_of(env, &killed_name)
            .iter()
            .all(|w| !w.what.ends_with("/after")),
        "the killed replica wrote the new parent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_leader_writes_nothing_after_its_deadline_and_comes_back_as_standby() {
    let (env, ns, control) = setup("ha-stop").await;
    let replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start(env, &ns, &format!("stop-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let leader = one_leader(&control, &ns, &all).await;
    let frozen = &replicas[leader];
    let others: Vec<&Replica> = replicas.iter().filter(|r| r.port != frozen.port).collect();
    apply(&control, &ns, "steady", "nginx:1.27").await;
    converged(env, &ns, "steady", "nginx:1.27", &all).await;

    frozen.signal("STOP");
    let stopped = tokio::time::Instant::now();
    // Parents keep changing during the freeze (two and a half lease durations).
    let mut round = 0;
    while stopped.elapsed() < Duration::from_secs(40) {
        round += 1;
        apply(&control, &ns, "steady", &format!("nginx:1.{}", 27 + round)).await;
        apply(&control, &ns, &format!("new-{round}"), "redis:7.4").await;
        tokio::time::sleep(Duration::from_secs(4)).await;
    }
    let image = format!("nginx:1.{}", 27 + round);
    converged(env, &ns, "steady", &image, &others).await;
    converged(env, &ns, &format!("new-{round}"), "redis:7.4", &others).await;
    let successor = holder(&control, &ns).await.expect("a holder");
    assert_ne!(
        successor, frozen.identity,
        "nobody took over from the frozen leader"
    );

    frozen.signal("CONT");
    // Thawed, it finds its deadline passed, refuses its own pending writes and stands by.
    until(
        "the thawed replica stands by",
        WAIT,
        &all,
        async || match frozen.role().await {
            Some((role, holder)) if role == "standby" && holder == successor => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    // More work after the thaw, which it sees and must leave to the leader.
    apply(&control, &ns, "steady", "nginx:2.0").await;
    apply(&control, &ns, "after-thaw", "redis:8.0").await;
    converged(env, &ns, "steady", "nginx:2.0", &others).await;
    converged(env, &ns, "after-thaw", "redis:8.0", &others).await;

    let writes = writes_of(env, &frozen.identity);
    assert!(
        writes
            .iter()
            .any(|w| w.what == format!("deployments {ns}/steady")),
        "the audit logs show no write of the leader before the freeze: the check would prove nothing"
    );
    let deadline = fence_deadline(&writes, &ns);
    let late = after(&writes, deadline);
    assert!(
        late.is_empty(),
        "{} wrote after its lease deadline {deadline}:\n{}\n{}",
        frozen.identity,
        late.join("\n"),
        frozen.log()
    );
    let successor_writes = writes_of(env, &successor);
    assert!(
        successor_writes
            .iter()
            .any(|w| w.at > deadline && w.cluster != Fleet::Control),
        "the new leader wrote no child after the old one's deadline"
    );
    eprintln!(
        "{} frozen 40 s: {} writes before its deadline {deadline}, none after; {successor} wrote {} after",
        frozen.identity,
        writes.len(),
        successor_writes.iter().filter(|w| w.at > deadline).count()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_replacement_hands_over_at_once_and_loses_no_change() {
    let (env, ns, control) = setup("ha-roll").await;
    let mut replicas = vec![
        Replica::start(env, &ns, "roll-1"),
        Replica::start(env, &ns, "roll-2"),
    ];
    let leader = one_leader(&control, &ns, &replicas.iter().collect::<Vec<_>>()).await;
    apply(&control, &ns, "app", "nginx:1.27").await;
    converged(
        env,
        &ns,
        "app",
        "nginx:1.27",
        &replicas.iter().collect::<Vec<_>>(),
    )
    .await;

    // The new one first (maxSurge 1), then the old leader goes (SIGTERM: it releases the Lease).
    replicas.push(Replica::start(env, &ns, "roll-3"));
    one_leader(&control, &ns, &replicas.iter().collect::<Vec<_>>()).await;
    let mut old = replicas.remove(leader);
    apply(&control, &ns, "app", "nginx:1.28").await;
    old.signal("TERM");
    let started = tokio::time::Instant::now();
    apply(&control, &ns, "app", "nginx:1.29").await;
    apply(&control, &ns, "during", "redis:7.4").await;
    let rest: Vec<&Replica> = replicas.iter().collect();
    let exit = until("the old leader exits on SIGTERM", WAIT, &rest, async || {
        old.child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or("running".to_owned())
    })
    .await;
    assert!(exit.success(), "{exit}\n{}", old.log());
    let next = one_leader(&control, &ns, &rest).await;
    let handover = started.elapsed();
    eprintln!(
        "SIGTERM of the leader -> {} leads: {handover:?}",
        rest[next].identity
    );
    assert!(
        handover < LEASE_DURATION,
        "the hand-over took {handover:?}: the Lease was waited out instead of released\n{}",
        old.log()
    );
    converged(env, &ns, "app", "nginx:1.29", &rest).await;
    converged(env, &ns, "during", "redis:7.4", &rest).await;
}

/// A TCP relay in front of an API server that can be cut: while cut, every byte either way is held (a
/// black hole, as a partition looks to both ends: no reset, no answer).
struct Relay {
    address: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Relay {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (cut, open) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pipe(client_read, server_write, open.clone()));
                tokio::spawn(pipe(server_read, client_write, open.clone()));
            }
        });
        Self { address, cut }
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: tokio::sync::watch::Receiver<bool>,
) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buffer).await else {
            return;
        };
        if n == 0 || cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

/// The environment's kubeconfig with `cluster`'s server behind `relay`, written next to it.
fn kubeconfig_via(env: &TestEnv, cluster: Fleet, relay: &Relay, file: &str) -> std::path::PathBuf {
    let mut kubeconfig = env.kubeconfig().clone();
    for named in &mut kubeconfig.clusters {
        if named.name == cluster.name() {
            named.cluster.as_mut().unwrap().server = Some(format!("https://{}", relay.address));
        }
    }
    let path = env.kubeconfig_path().with_file_name(file);
    // JSON is YAML: kubeconfig readers take it as it is.
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    path
}

fn server_of(env: &TestEnv, cluster: Fleet) -> std::net::SocketAddr {
    let named = env
        .kubeconfig()
        .clusters
        .iter()
        .find(|c| c.name == cluster.name())
        .unwrap();
    let server = named.cluster.as_ref().unwrap().server.clone().unwrap();
    server.strip_prefix("https://").unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_the_control_cluster_stops_writing_to_the_children() {
    let (env, ns, control) = setup("ha-cut").await;
    let relay = Relay::start(server_of(env, Fleet::Control)).await;
    let cut_off = Replica::start_with(
        &kubeconfig_via(env, Fleet::Control, &relay, &format!("kubeconfig-{ns}")),
        &ns,
        "cut-1",
    );
    one_leader(&control, &ns, &[&cut_off]).await;
    let other = Replica::start(env, &ns, "cut-2");
    let both = [&cut_off, &other];
    assert_eq!(
        one_leader(&control, &ns, &both).await,
        0,
        "the first replica leads"
    );
    apply(&control, &ns, "app", "nginx:1.27").await;
    converged(env, &ns, "app", "nginx:1.27", &both).await;

    // Only cut-1 loses the control cluster; it still reaches both child clusters.
    relay.cut();
    until(
        "the other replica takes the Lease",
        WAIT,
        &both,
        async || match holder(&control, &ns).await {
            Some(h) if h == other.identity => Ok(()),
            h => Err(format!("held by {h:?}")),
        },
    )
    .await;
    // The children vanish from the child clusters: both replicas see it (cut-1 through its child watches)
    // and want them back; only the leader may put them back.
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        Api::<Deployment>::namespaced(client, &ns)
            .delete("app", &Default::default())
            .await
            .unwrap();
    }
    apply(&control, &ns, "app", "nginx:1.28").await;
    converged(env, &ns, "app", "nginx:1.28", &both).await;
    until(
        "cut-1 tries to repair the children and is refused",
        WAIT,
        &both,
        async || {
            let log = cut_off.log();
            if log.contains("not the leader") {
                Ok(())
            } else {
                Err("no refused write yet".into())
            }
        },
    )
    .await;

    let writes = writes_of(env, &cut_off.identity);
    let deadline = fence_deadline(&writes, &ns);
    let late = after(&writes, deadline);
    assert!(
        late.is_empty(),
        "cut-1 wrote after its lease deadline {deadline}:\n{}\n{}",
        late.join("\n"),
        cut_off.log()
    );
    eprintln!(
        "cut-1 cut off from control: {} writes before its deadline {deadline}, none after; its /readyz \
         says {:?}",
        writes.len(),
        cut_off.role().await
    );
}
