//! One operator of the fleet section in its own process: the kube-rs baseline ([`super::baseline`]) or
//! the kubeplex operator below, written as `examples/fleet` is. The parent drives the scenario; this process
//! only runs the operator, says when it synced, and answers `report` on stdin with its CPU, RSS, heap and
//! connections.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::config::Kubeconfig;
use kubeplex::{
    Child, ContextName, Controller, Cx, Manager, Plan, Reconcile, members::KubeconfigSecrets,
    members::LeavePolicy,
};
use serde::{Deserialize, Serialize};

use super::app::{CONTROL, FINALIZER, FleetApp, PARENT_NAMESPACE, deployment_for};
use crate::child::{Side, client_for};
use crate::system::{
    connections_per_server, live_bytes, peak_connections_per_server, rss_bytes, sample_connections,
};

/// How long the operator may take to sync its caches.
const SYNC_WAIT: Duration = Duration::from_secs(120);

/// What a fleet child runs; the parent serialises it into the command line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct FleetSpec {
    pub side: Side,
    pub kubeconfig: PathBuf,
    /// The kubeconfig context of the control cluster.
    pub control: String,
    /// (logical child context, kubeconfig context).
    pub children: Vec<(String, String)>,
    /// The child namespaces (every parent asks for all of them).
    pub namespaces: Vec<String>,
    /// Reconciles at once (`None`: unbounded, both sides' default).
    pub concurrency: Option<u16>,
    /// kubeplex only: run as one replica of several, with leader election (the failover section).
    #[serde(default)]
    pub election: Option<ElectionSpec>,
    /// kubeplex only: children also in every member of the fleet, the members from kubeconfig Secrets under
    /// `LeavePolicy::Delete` (the member sections).
    #[serde(default)]
    pub members: Option<MembersSpec>,
    /// kubeplex only: serve a validating webhook for the parents ([`super::admission`]).
    #[serde(default)]
    pub admission: bool,
}

/// Where the operator finds its members: Secrets in `namespace` of the control context matching `selector`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct MembersSpec {
    pub namespace: String,
    pub selector: String,
    /// Each member's children in the namespace its kubeconfig defaults to (`Child::member_default_namespace`),
    /// one per parent, instead of one per parent in each of the spec's namespaces.
    #[serde(default)]
    pub own_namespace: bool,
}

/// A replica's leader election: the Lease `namespace/name` in the control context, its identity, timings.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ElectionSpec {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration_s: u64,
    pub renew_deadline_s: u64,
    pub retry_period_s: u64,
}

/// The first line a fleet child prints, once its caches synced.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Synced {
    pub synced_s: f64,
    pub rss_before: u64,
    pub heap_before: u64,
    /// kubeplex's probe server (`/readyz`); none for the baseline.
    pub probe: Option<String>,
    /// With `admission`: the webhook's address and its certificate (PEM).
    #[serde(default)]
    pub webhook: Option<(String, String)>,
}

/// The answer to `report`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Reading {
    /// CPU seconds (user + system) the process used so far.
    pub cpu_s: f64,
    pub rss: u64,
    pub heap: u64,
    /// The most connections to one API server now, and the most seen at once so far (sampled).
    pub connections: u32,
    pub connections_peak: u32,
}

// ---- the kubeplex operator, as examples/fleet writes it; its plan is chosen at run time ----

static PLAN: OnceLock<Plan<ContextName>> = OnceLock::new();

struct FleetOperator {
    clusters: Vec<ContextName>,
    /// Children also in every member (`owns(Deployment, members, ..)`).
    members: bool,
    /// In each member, one child per parent in the member's default namespace.
    own_namespace: bool,
}

impl Controller for FleetOperator {
    type Resource = FleetApp;
    type Context = ContextName;
    fn plan() -> Plan<ContextName> {
        PLAN.get()
            .expect("the plan is set before the manager starts")
            .clone()
    }
}

impl Reconcile for FleetOperator {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        app: Arc<FleetApp>,
        cx: &Cx<ContextName>,
    ) -> Result<kubeplex::Action, Self::Error> {
        for &cluster in &self.clusters {
            for namespace in &app.spec.namespaces {
                cx.child(cluster, deployment_for(&app, namespace))?;
            }
        }
        if self.members {
            for member in cx.members() {
                if self.own_namespace {
                    let mut child = deployment_for(&app, "");
                    child.metadata.namespace = None;
                    cx.child(&member, child)?;
                    continue;
                }
                for namespace in &app.spec.namespaces {
                    cx.child(&member, deployment_for(&app, namespace))?;
                }
            }
        }
        Ok(kubeplex::Action::requeue(Duration::from_secs(3600)))
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

async fn start_kubeplex(
    spec: &FleetSpec,
    kubeconfig: Kubeconfig,
) -> Result<kubeplex::Running, String> {
    let control = ContextName::new(CONTROL);
    let clusters: Vec<ContextName> = spec
        .children
        .iter()
        .map(|(name, _)| ContextName::new(leak(name)))
        .collect();
    let mut children = Child::of::<Deployment>().with_contexts(clusters.iter().copied());
    // None named: the children are in each member's own namespace only.
    if !spec.namespaces.is_empty() {
        children = children.with_namespaces(spec.namespaces.clone());
    }
    let own_namespace = spec.members.as_ref().is_some_and(|m| m.own_namespace);
    if own_namespace {
        children = children.member_default_namespace();
    } else if spec.members.is_some() {
        children = children.members();
    }
    let mut plan = Plan::new("fleet-bench")
        .with_contexts([control])
        .with_namespaces([PARENT_NAMESPACE])
        .owns(children)
        .with_finalizer(FINALIZER)
        .with_error_requeue(Duration::from_secs(5));
    if let Some(limit) = spec.concurrency {
        plan = plan.with_concurrency(limit);
    }
    PLAN.set(plan)
        .map_err(|_| "the plan was already set".to_owned())?;
    // Members and contexts may point at one server on purpose.
    let mut manager = Manager::with_kubeconfig(kubeconfig)
        .probes("127.0.0.1:0")
        .allow_duplicate_clusters()
        .context_alias(control, spec.control.clone());
    for ((_, kubeconfig_context), cluster) in spec.children.iter().zip(&clusters) {
        manager = manager.context_alias(*cluster, kubeconfig_context.clone());
    }
    if let Some(election) = &spec.election {
        let seconds = Duration::from_secs;
        manager = manager.leader_election(
            kubeplex::ha::LeaderElection::new(control, &election.namespace, &election.name)
                .with_identity(&election.identity)
                .lease_duration(seconds(election.lease_duration_s))
                .renew_deadline(seconds(election.renew_deadline_s))
                .retry_period(seconds(election.retry_period_s)),
        );
    }
    if spec.admission {
        let contexts = spec.children.iter().map(|(name, _)| name.clone()).collect();
        manager = manager.webhooks(super::admission::webhooks(contexts));
    }
    if let Some(members) = &spec.members {
        let secrets = KubeconfigSecrets::new(control, &members.namespace, &members.selector);
        manager = manager.members(secrets, LeavePolicy::Delete);
    }
    manager
        .controller(FleetOperator {
            clusters,
            members: spec.members.is_some(),
            own_namespace,
        })
        .start()
        .await
        .map_err(|e| e.to_string())
}

enum Running {
    Baseline(super::baseline::Running),
    Kubeplex(kubeplex::Running),
}

async fn start(spec: &FleetSpec, kubeconfig: Kubeconfig) -> Result<Running, String> {
    match spec.side {
        Side::Kubeplex => Ok(Running::Kubeplex(start_kubeplex(spec, kubeconfig).await?)),
        Side::Baseline => {
            let control = client_for(&kubeconfig, &spec.control).await?;
            let mut clusters = Vec::new();
            for (name, kubeconfig_context) in &spec.children {
                clusters.push((
                    name.clone(),
                    client_for(&kubeconfig, kubeconfig_context).await?,
                ));
            }
            Ok(Running::Baseline(super::baseline::start(
                control,
                clusters,
                spec.concurrency,
            )))
        }
    }
}

fn reading() -> Reading {
    // A diagnostic: with KUBEPLEX_BENCH_MALLOC_TRIM=1, freed heap goes back to the OS before RSS is read,
    // which tells the allocator's retention apart from memory in use.
    if std::env::var_os("KUBEPLEX_BENCH_MALLOC_TRIM").is_some_and(|v| v == "1") {
        // SAFETY: `malloc_trim` only releases free memory of the allocator; it touches no live allocation.
        unsafe {
            libc::malloc_trim(0);
        }
    }
    Reading {
        cpu_s: crate::system::own_seconds(),
        rss: rss_bytes(),
        heap: live_bytes() as u64,
        connections: connections_per_server(),
        connections_peak: peak_connections_per_server(),
    }
}

fn say(line: &impl Serialize) -> Result<(), String> {
    use std::io::Write;
    let line = serde_json::to_string(line).map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing to the parent: {e}"))
}

/// The parent's requests, one per line; the channel ends with stdin. (A thread: tokio's stdin needs a
/// feature the workspace does not enable, and this is one line per phase.)
fn read_stdin() -> tokio::sync::mpsc::Receiver<String> {
    let (lines, requests) = tokio::sync::mpsc::channel(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if lines.blocking_send(line).is_err() {
                break;
            }
        }
    });
    requests
}

/// With `KUBEPLEX_BENCH_OPERATOR_LOG=PREFIX`, the operator logs (`RUST_LOG`, else `kubeplex=debug`) to
/// `PREFIX-<pid>.log` with timestamps, so a figure's time can be traced through the runtime's log lines.
/// Off by default: formatting log lines would count in the figures.
fn log_to_file() -> Result<(), String> {
    let Some(prefix) = std::env::var_os("KUBEPLEX_BENCH_OPERATOR_LOG") else {
        return Ok(());
    };
    let path = format!("{}-{}.log", prefix.to_string_lossy(), std::process::id());
    let file = std::fs::File::create(&path).map_err(|e| format!("cannot create {path}: {e}"))?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kubeplex=debug"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .init();
    Ok(())
}

pub(crate) async fn main(started: Instant, spec: &str) -> Result<(), String> {
    let spec: FleetSpec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    log_to_file()?;
    let kubeconfig = Kubeconfig::read_from(&spec.kubeconfig).map_err(|e| e.to_string())?;
    let mut requests = read_stdin();
    sample_connections();
    let heap_before = live_bytes() as u64;
    let rss_before = rss_bytes();
    let running = start(&spec, kubeconfig).await?;
    let synced = async {
        match &running {
            Running::Baseline(running) => running.synced().await,
            Running::Kubeplex(running) => running.wait_started().await.map_err(|e| e.to_string()),
        }
    };
    tokio::time::timeout(SYNC_WAIT, synced)
        .await
        .map_err(|_| "caches did not sync in time".to_owned())??;
    say(&Synced {
        synced_s: started.elapsed().as_secs_f64(),
        rss_before,
        heap_before,
        probe: match &running {
            Running::Kubeplex(running) => running.probe_address().map(|a| a.to_string()),
            Running::Baseline(_) => None,
        },
        webhook: match &running {
            Running::Kubeplex(running) => running
                .webhook_address()
                .zip(running.webhook_ca_bundle())
                .map(|(address, ca)| (address.to_string(), ca.to_owned())),
            Running::Baseline(_) => None,
        },
    })?;
    while let Some(line) = requests.recv().await {
        match line.trim() {
            "report" => say(&reading())?,
            "exit" => break,
            other => return Err(format!("unknown request {other:?}")),
        }
    }
    // Exit without tearing down: teardown is not measured.
    std::process::exit(0);
}
