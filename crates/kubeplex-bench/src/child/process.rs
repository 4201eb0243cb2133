//! One measurement in its own process: either a plain kube-runtime `Controller` per (context, namespace) —
//! what a kube-rs user writes — or one kubeplex `Manager`, doing the same work; it prints one JSON line.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::Store;
use kube::runtime::{Controller as KubeController, controller, watcher};
use kube::{Client, Config};
use kubeplex::{ContextName, Controller, Cx, Manager, Plan, Reconcile};
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::spec::{LatencySpec, Outcome, Side, Spec};
use crate::harness::answer;
use crate::system::{live_bytes, rss_anon_bytes, rss_bytes};

/// How long any wait in a child may take before the measurement counts as failed.
const CHILD_WAIT: Duration = Duration::from_secs(300);

/// Shared by every reconcile of the child, whichever side it runs.
struct Probe {
    base: Instant,
    /// Prefixes this run's `seq` values, so values left by an earlier run are not taken for this run's writes.
    token: String,
    namespace: String,
    get: bool,
    distinct: bool,
    expect: usize,
    seen: Mutex<HashSet<String>>,
    count: AtomicUsize,
    distinct_count: AtomicUsize,
    reached: Notify,
    first_start: AtomicU64,
    last_end: AtomicU64,
    /// Per write sequence number: 1 + ns (since `base`) at which it was sent; 0 until then.
    sent_at: Vec<AtomicU64>,
    /// Per write sequence number: 1 + ns (since `base`) at which a reconcile that began after it was sent
    /// first saw it.
    seen_at: Vec<AtomicU64>,
    /// A limit shared by the baseline's per-cluster controllers, so both sides run `concurrency` at once.
    global: Option<Semaphore>,
}

impl Probe {
    fn ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    async fn reconcile(&self, context: &str, object: &ConfigMap, client: Option<Client>) {
        let start = self.ns();
        self.first_start.fetch_min(start, Ordering::Relaxed);
        if let Some(seq) = object
            .data
            .as_ref()
            .and_then(|d| d.get("seq"))
            .and_then(|s| s.strip_prefix(self.token.as_str()))
            .and_then(|s| s.parse::<usize>().ok())
            && let Some(slot) = self.seen_at.get(seq)
        {
            // A reconcile counts for a write only if it began after the write was sent: one that began
            // earlier cannot have been caused by it.
            let sent = self.sent_at[seq].load(Ordering::Acquire);
            if sent != 0 && start + 1 >= sent {
                let _ = slot.compare_exchange(0, start + 1, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        let name = object.metadata.name.as_deref().unwrap_or_default();
        {
            let _permit = match &self.global {
                Some(limit) => Some(limit.acquire().await),
                None => None,
            };
            if let Some(client) = client {
                let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
                let _ = api.get(name).await;
            }
        }
        if self.distinct {
            let new = self.seen.lock().insert(format!("{context}/{name}"));
            if new && self.distinct_count.fetch_add(1, Ordering::Relaxed) + 1 == self.expect {
                self.reached.notify_one();
            }
        }
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.distinct && count == self.expect {
            self.reached.notify_one();
        }
        self.last_end.fetch_max(self.ns(), Ordering::Relaxed);
    }
}

// ---- kubeplex side: controllers whose plans are chosen at run time ----

/// One reconciler type, registered `controllers` times, each with a plan of its own.
struct Bench(Arc<Probe>);

impl Controller for Bench {
    type Resource = ConfigMap;
    type Context = ContextName;
    /// Replaced at registration: every plan comes from the spec.
    fn plan() -> Plan<ContextName> {
        Plan::new("bench")
    }
}

impl Reconcile for Bench {
    type Error = Infallible;
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<ContextName>,
    ) -> Result<kubeplex::Action, Infallible> {
        let context = cx.cluster();
        let client = if self.0.get {
            cx.client(context.clone()).ok()
        } else {
            None
        };
        self.0.reconcile(context.name(), &object, client).await;
        Ok(kubeplex::Action::await_change())
    }
}

/// A context named at run time. `ContextName` holds a `&'static str` (`Context::name` returns one), so the
/// names are leaked: a few short strings, once per child process.
fn context_name(name: &str) -> ContextName {
    ContextName::new(Box::leak(name.to_owned().into_boxed_str()))
}

async fn start_kubeplex(
    spec: &Spec,
    kubeconfig: Kubeconfig,
    probe: &Arc<Probe>,
) -> Result<Running, String> {
    let contexts: Vec<ContextName> = spec
        .contexts
        .iter()
        .map(|(name, _)| context_name(name))
        .collect();
    // Several contexts point at one server on purpose.
    let mut manager = Manager::with_kubeconfig(kubeconfig)
        .probes("127.0.0.1:0")
        .allow_duplicate_clusters();
    for ((_, kubeconfig_context), context) in spec.contexts.iter().zip(&contexts) {
        manager = manager.context_alias(*context, kubeconfig_context.clone());
    }
    for i in 0..spec.controllers {
        manager = manager.controller_with(Bench(probe.clone()), |_| {
            let plan = Plan::new(format!("bench-{i}"))
                .with_contexts(contexts.iter().copied())
                .with_namespaces([spec.namespace.clone()]);
            match spec.concurrency {
                Some(limit) => plan.with_concurrency(limit),
                None => plan,
            }
        });
    }
    let running = manager.start().await.map_err(|e| e.to_string())?;
    Ok(Running::Kubeplex(running))
}

// ---- baseline: one kube-runtime Controller per (context, namespace), per controller ----

struct BaselineCx {
    context: String,
    client: Client,
    probe: Arc<Probe>,
}

async fn baseline_reconcile(
    object: Arc<ConfigMap>,
    cx: Arc<BaselineCx>,
) -> Result<controller::Action, Infallible> {
    let client = cx.probe.get.then(|| cx.client.clone());
    cx.probe.reconcile(&cx.context, &object, client).await;
    Ok(controller::Action::await_change())
}

fn baseline_error(_: Arc<ConfigMap>, _: &Infallible, _: Arc<BaselineCx>) -> controller::Action {
    controller::Action::await_change()
}

pub(crate) async fn client_for(kubeconfig: &Kubeconfig, context: &str) -> Result<Client, String> {
    let options = KubeConfigOptions {
        context: Some(context.to_owned()),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
        .await
        .map_err(|e| format!("context {context}: {e}"))?;
    Client::try_from(config).map_err(|e| format!("context {context}: {e}"))
}

async fn start_baseline(
    spec: &Spec,
    kubeconfig: Kubeconfig,
    probe: &Arc<Probe>,
) -> Result<Running, String> {
    let mut clients = Vec::new();
    for (context, kubeconfig_context) in &spec.contexts {
        clients.push((
            context.clone(),
            client_for(&kubeconfig, kubeconfig_context).await?,
        ));
    }
    let mut stores = Vec::new();
    let mut tasks = JoinSet::new();
    for _ in 0..spec.controllers {
        for (context, client) in &clients {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &spec.namespace);
            let mut config = controller::Config::default();
            if let Some(limit) = spec.concurrency {
                config = config.concurrency(limit);
            }
            let controller =
                KubeController::new(api, watcher::Config::default()).with_config(config);
            stores.push(controller.store());
            let cx = Arc::new(BaselineCx {
                context: context.clone(),
                client: client.clone(),
                probe: probe.clone(),
            });
            tasks.spawn(
                controller
                    .run(baseline_reconcile, baseline_error, cx)
                    .for_each(|result| {
                        if let Err(error) = result {
                            eprintln!("baseline controller: {error}");
                        }
                        std::future::ready(())
                    }),
            );
        }
    }
    Ok(Running::Baseline { stores, tasks })
}

enum Running {
    Baseline {
        stores: Vec<Store<ConfigMap>>,
        #[allow(dead_code)] // Held so the controllers keep running.
        tasks: JoinSet<()>,
    },
    Kubeplex(kubeplex::Running),
}

impl Running {
    async fn synced(&self) -> Result<(), String> {
        match self {
            Running::Baseline { stores, .. } => {
                // kube-runtime's `Store::wait_until_ready` keeps one waker: the Controller's own applier awaits
                // the same store, so a second waiter may never be woken. Re-polling every millisecond bounds
                // that (it adds at most ~1 ms to the baseline's figure).
                for store in stores {
                    loop {
                        match tokio::time::timeout(
                            Duration::from_millis(1),
                            store.wait_until_ready(),
                        )
                        .await
                        {
                            Ok(Ok(())) => break,
                            Ok(Err(e)) => return Err(format!("a store was dropped: {e}")),
                            Err(_) => {}
                        }
                    }
                }
                Ok(())
            }
            Running::Kubeplex(running) => running.wait_started().await.map_err(|e| e.to_string()),
        }
    }

    fn watches_opened(&self) -> usize {
        match self {
            Running::Baseline { stores, .. } => stores.len(),
            Running::Kubeplex(running) => running.watches_opened(),
        }
    }
}

/// Writes `lat-N` objects at a steady rate, each stamped in `probe.sent_at` just before its request is
/// sent: the watch event of a write can reach a reconcile before the write's own response reaches the
/// writer, so the response is no start to time from.
async fn write_steadily(
    probe: &Probe,
    client: Client,
    namespace: &str,
    latency: &LatencySpec,
) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let total = (latency.rate_per_s * latency.seconds) as usize;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / latency.rate_per_s);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for seq in 0..total {
        tick.tick().await;
        let name = format!("lat-{}", seq % latency.objects);
        let patch = serde_json::json!({ "data": { "seq": format!("{}{seq}", probe.token) } });
        probe.sent_at[seq].store(probe.ns() + 1, Ordering::Release);
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("writing {name}: {e}"))?;
    }
    Ok(())
}

pub(crate) async fn main(started: Instant, spec: &str) -> Result<(), String> {
    let spec: Spec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    let kubeconfig = Kubeconfig::read_from(&spec.kubeconfig).map_err(|e| e.to_string())?;
    let writes = spec
        .latency
        .as_ref()
        .map_or(0, |l| (l.rate_per_s * l.seconds) as usize);
    let probe = Arc::new(Probe {
        base: started,
        token: format!("{}.", std::process::id()),
        namespace: spec.namespace.clone(),
        get: spec.get_per_reconcile,
        distinct: spec.distinct,
        expect: spec.expect,
        seen: Mutex::default(),
        count: AtomicUsize::new(0),
        distinct_count: AtomicUsize::new(0),
        reached: Notify::new(),
        first_start: AtomicU64::new(u64::MAX),
        last_end: AtomicU64::new(0),
        sent_at: (0..writes).map(|_| AtomicU64::new(0)).collect(),
        seen_at: (0..writes).map(|_| AtomicU64::new(0)).collect(),
        global: match spec.side {
            Side::Baseline if spec.contexts.len() > 1 => spec
                .concurrency
                .map(|limit| Semaphore::new(usize::from(limit))),
            _ => None,
        },
    });
    let writer_client = match (&spec.latency, spec.contexts.first()) {
        (Some(_), Some((_, kubeconfig_context))) => {
            Some(client_for(&kubeconfig, kubeconfig_context).await?)
        }
        _ => None,
    };

    let heap_before = live_bytes() as u64;
    let rss_before = rss_bytes();
    let rss_anon_before = rss_anon_bytes();
    let running = match spec.side {
        Side::Baseline => start_baseline(&spec, kubeconfig, &probe).await?,
        Side::Kubeplex => start_kubeplex(&spec, kubeconfig, &probe).await?,
    };
    tokio::time::timeout(CHILD_WAIT, running.synced())
        .await
        .map_err(|_| "caches did not sync in time".to_owned())??;
    let synced_s = started.elapsed().as_secs_f64();
    let cpu_synced_s = crate::system::own_seconds();
    let done_s = if spec.expect > 0 {
        tokio::time::timeout(CHILD_WAIT, probe.reached.notified())
            .await
            .map_err(|_| {
                format!(
                    "only {} of {} reconciles in time",
                    probe.count.load(Ordering::Relaxed),
                    spec.expect
                )
            })?;
        Some(started.elapsed().as_secs_f64())
    } else {
        None
    };

    let mut latencies_ms = Vec::new();
    let mut missed = 0;
    if let (Some(latency), Some(client)) = (&spec.latency, writer_client) {
        write_steadily(&probe, client, &spec.namespace, latency).await?;
        tokio::time::sleep(Duration::from_millis(latency.tail_ms)).await;
        for (sent, seen) in probe.sent_at.iter().zip(&probe.seen_at) {
            match (sent.load(Ordering::Acquire), seen.load(Ordering::Relaxed)) {
                (_, 0) => missed += 1,
                (sent, seen) => latencies_ms.push(seen.saturating_sub(sent) as f64 / 1e6),
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(spec.settle_ms)).await;
    let rss_after = rss_bytes();
    let rss_anon_after = rss_anon_bytes();
    let heap_after = live_bytes() as u64;
    let seconds = |ns: u64| ns as f64 / 1e9;
    let first = probe.first_start.load(Ordering::Relaxed);
    let last = probe.last_end.load(Ordering::Relaxed);
    let outcome = Outcome {
        synced_s,
        cpu_synced_s,
        cpu_s: crate::system::own_seconds(),
        server_cpu_s: 0.0,
        done_s,
        first_reconcile_s: (first != u64::MAX).then(|| seconds(first)),
        last_reconcile_s: (last != 0).then(|| seconds(last)),
        rss_before,
        rss_after,
        rss_anon_before,
        rss_anon_after,
        heap_before,
        heap_after,
        watches_opened: running.watches_opened(),
        reconciles: probe.count.load(Ordering::Relaxed),
        latencies_ms,
        missed,
    };
    match answer(&outcome)? {}
}
