//! The `__fairness` process of section `fairness` ([`super::section`]): one side reconciles the noisy and
//! the quiet context; the process changes the quiet object every period, first alone (the reference), then
//! while it floods the noisy context with a change of every flood object, until the flood is reconciled;
//! it prints one [`FairnessOutcome`] line.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::config::Kubeconfig;
use kube::runtime::{Controller as KubeController, controller, watcher};
use kubeplex::{ContextName, Controller, Cx, Manager, Plan, Reconcile, plan::Dispatch};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::probe::{FLOOD_VALUE, Probe, QUIET_VALUE};
use super::spec::{
    FLOOD_PREFIX, FLOOD_WRITERS, FairnessOutcome, FairnessSpec, NAMESPACE, NOISY_CLUSTER,
    QUIET_CLUSTER, QUIET_OBJECT, Variant,
};
use crate::child::client_for;
use crate::harness::{answer, wait_started};

/// How long any wait in the process may take before the run counts as failed.
const WAIT: Duration = Duration::from_secs(300);

// ---- kubeplex side ----

struct Fairness(Arc<Probe>);

impl Controller for Fairness {
    type Resource = ConfigMap;
    type Context = ContextName;
    /// Replaced at registration: the dispatch comes from the spec.
    fn plan() -> Plan<ContextName> {
        Plan::new("fairness")
    }
}

impl Reconcile for Fairness {
    type Error = Infallible;
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        _: &Cx<ContextName>,
    ) -> Result<kubeplex::Action, Infallible> {
        self.0.reconcile(&object).await;
        Ok(kubeplex::Action::await_change())
    }
}

fn start_kubeplex(
    spec: &FairnessSpec,
    kubeconfig: Kubeconfig,
    probe: &Arc<Probe>,
) -> Result<Manager, String> {
    let (noisy, quiet) = (ContextName::new("noisy"), ContextName::new("quiet"));
    let concurrency = spec.concurrency;
    let variant = spec.variant;
    Ok(Manager::with_kubeconfig(kubeconfig)
        .probes("127.0.0.1:0")
        // The two contexts may share one server, on purpose.
        .allow_duplicate_clusters()
        .context_alias(noisy, NOISY_CLUSTER)
        .context_alias(quiet, QUIET_CLUSTER)
        .controller_with(Fairness(probe.clone()), move |_| {
            let plan = Plan::new("fairness")
                .with_contexts([noisy, quiet])
                .with_namespaces([NAMESPACE])
                .with_concurrency(concurrency);
            match variant {
                Variant::Fifo => plan.with_dispatch(Dispatch::Fifo),
                Variant::FairCapped => plan
                    .with_dispatch(Dispatch::Fair)
                    .with_concurrency_per_cluster(concurrency.saturating_sub(1).max(1)),
                Variant::Fair | Variant::Baseline => plan.with_dispatch(Dispatch::Fair),
            }
        }))
}

// ---- baseline: one kube-runtime Controller per context ----

async fn baseline_reconcile(
    object: Arc<ConfigMap>,
    probe: Arc<Probe>,
) -> Result<controller::Action, Infallible> {
    probe.reconcile(&object).await;
    Ok(controller::Action::await_change())
}

fn baseline_error(_: Arc<ConfigMap>, _: &Infallible, _: Arc<Probe>) -> controller::Action {
    controller::Action::await_change()
}

/// One Controller per context, each with the whole concurrency; the probe's shared semaphore holds the total
/// to the same.
async fn start_baseline(
    spec: &FairnessSpec,
    kubeconfig: &Kubeconfig,
    probe: &Arc<Probe>,
) -> Result<(JoinSet<()>, Vec<kube::runtime::reflector::Store<ConfigMap>>), String> {
    let mut tasks = JoinSet::new();
    let mut stores = Vec::new();
    for cluster in [NOISY_CLUSTER, QUIET_CLUSTER] {
        let client = client_for(kubeconfig, cluster).await?;
        let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
        let controller = KubeController::new(api, watcher::Config::default())
            .with_config(controller::Config::default().concurrency(spec.concurrency));
        stores.push(controller.store());
        tasks.spawn(
            controller
                .run(baseline_reconcile, baseline_error, probe.clone())
                .for_each(|result| {
                    if let Err(error) = result {
                        eprintln!("baseline controller: {error}");
                    }
                    std::future::ready(())
                }),
        );
    }
    Ok((tasks, stores))
}

/// The process's own watch of the quiet object, beside the side's: when each quiet write arrives.
async fn watch_quiet(probe: Arc<Probe>, api: Api<ConfigMap>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={QUIET_OBJECT}"));
    let prefix = format!("{}{QUIET_VALUE}", probe.token);
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    while let Some(event) = events.next().await {
        let (Ok(watcher::Event::Apply(object)) | Ok(watcher::Event::InitApply(object))) = event
        else {
            continue;
        };
        if let Some(seq) = object
            .data
            .as_ref()
            .and_then(|d| d.get("seq"))
            .and_then(|s| s.strip_prefix(prefix.as_str()))
            .and_then(|s| s.parse::<usize>().ok())
        {
            probe.quiet_arrived(seq);
        }
    }
}

// ---- the writers ----

/// Quiet writes from `first` on, one every period, until `stop` says so (or there is no slot left);
/// returns the next write's number and the most flood changes that waited at a write.
async fn write_quiet(
    probe: &Probe,
    api: &Api<ConfigMap>,
    period: Duration,
    first: usize,
    stop: impl Fn(usize) -> bool,
    flood_answered: &std::sync::atomic::AtomicUsize,
) -> Result<(usize, usize), String> {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backlog = 0;
    let mut seq = first;
    while seq < probe.quiet_capacity() && !stop(seq) {
        tick.tick().await;
        if stop(seq) {
            break;
        }
        let reconciled = probe.flood_reconciled.load(Ordering::Acquire);
        backlog = backlog.max(
            flood_answered
                .load(Ordering::Acquire)
                .saturating_sub(reconciled),
        );
        let patch = serde_json::json!({
            "data": { "seq": format!("{}{QUIET_VALUE}{seq}", probe.token) }
        });
        probe.quiet_sending(seq);
        api.patch(QUIET_OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("writing {QUIET_OBJECT}: {e}"))?;
        seq += 1;
    }
    Ok((seq, backlog))
}

/// Changes every flood object once, [`FLOOD_WRITERS`] at a time; counts the writes answered.
async fn write_flood(
    probe: &Probe,
    api: &Api<ConfigMap>,
    flood: usize,
    answered: &std::sync::atomic::AtomicUsize,
) -> Result<(), String> {
    let value = format!("{}{FLOOD_VALUE}", probe.token);
    let writes = (0..flood).map(|i| {
        let patch = serde_json::json!({ "data": { "seq": value } });
        async move {
            let name = format!("{FLOOD_PREFIX}{i}");
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| format!("writing {name}: {e}"))?;
            answered.fetch_add(1, Ordering::Release);
            Ok::<(), String>(())
        }
    });
    let mut results = stream::iter(writes).buffer_unordered(FLOOD_WRITERS);
    while let Some(result) = results.next().await {
        result?;
    }
    Ok(())
}

/// The `__fairness` process: runs one side, writes, prints one [`FairnessOutcome`] line.
pub(crate) async fn main(started: Instant, spec: &str) -> Result<(), String> {
    let spec: FairnessSpec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    let kubeconfig = Kubeconfig::read_from(&spec.kubeconfig).map_err(|e| e.to_string())?;
    let period = Duration::from_millis(spec.quiet_period_ms.max(1));
    let tail = Duration::from_millis(spec.tail_ms);
    let reference =
        usize::try_from(u64::from(spec.reference_seconds) * 1000 / spec.quiet_period_ms.max(1))
            .unwrap_or(usize::MAX);
    let capacity = reference
        + usize::try_from(WAIT.as_millis() / u128::from(spec.quiet_period_ms.max(1)))
            .unwrap_or(usize::MAX);
    let global =
        (spec.variant == Variant::Baseline).then(|| Semaphore::new(usize::from(spec.concurrency)));
    let probe = Arc::new(Probe::new(
        tokio::time::Instant::from_std(started),
        Duration::from_millis(spec.work_ms),
        global,
        capacity,
        spec.flood,
    ));
    let writer = |cluster: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let client: Client = client_for(&kubeconfig, cluster).await?;
            Ok::<_, String>(Api::<ConfigMap>::namespaced(client, NAMESPACE))
        }
    };
    let (quiet_api, noisy_api) = (writer(QUIET_CLUSTER).await?, writer(NOISY_CLUSTER).await?);
    let _delivery = tokio::spawn(watch_quiet(probe.clone(), quiet_api.clone()));
    // Held to the end: the side keeps running while it is measured.
    let mut running = None;
    let mut baseline = None;
    match spec.variant {
        Variant::Baseline => baseline = Some(start_baseline(&spec, &kubeconfig, &probe).await?),
        _ => {
            let manager = start_kubeplex(&spec, kubeconfig.clone(), &probe)?;
            running = Some(manager.start().await.map_err(|e| e.to_string())?);
        }
    }
    if let Some(running) = &running {
        wait_started(running, WAIT).await?;
    }
    // Every object reconciled once (the initial lists: no work) before anything is timed.
    let initial = spec.flood + 1;
    let waited = Instant::now();
    while probe.reconciles.load(Ordering::Relaxed) < initial {
        if waited.elapsed() > WAIT {
            return Err(format!(
                "{} of {initial} objects reconciled in time",
                probe.reconciles.load(Ordering::Relaxed)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(spec.pause_ms)).await;

    // The reference: the quiet context alone.
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let (next, _) = write_quiet(
        &probe,
        &quiet_api,
        period,
        0,
        |seq| seq >= reference,
        &answered,
    )
    .await?;
    tokio::time::sleep(tail).await;
    let (reference_ms, reference_unseen) = probe.quiet_latencies(0, next, u64::MAX);
    let reference_delivery_ms = probe.quiet_deliveries(0, next, u64::MAX);

    // The flood, with the quiet context changing all along until the flood is reconciled.
    let flood_start = probe.ns();
    let drained = probe.drained.notified();
    let flood = async {
        write_flood(&probe, &noisy_api, spec.flood, &answered).await?;
        Ok::<f64, String>((probe.ns() - flood_start) as f64 / 1e9)
    };
    let quiet = write_quiet(
        &probe,
        &quiet_api,
        period,
        next,
        |_| probe.drained_at() != 0,
        &answered,
    );
    let drain = async {
        if probe.drained_at() == 0 {
            tokio::time::timeout(WAIT, drained).await.map_err(|_| {
                format!(
                    "{} of {} flood changes reconciled in time",
                    probe.flood_reconciled.load(Ordering::Relaxed),
                    spec.flood
                )
            })?;
        }
        Ok::<(), String>(())
    };
    let (written, quiet, drain) = tokio::join!(flood, quiet, drain);
    let (flood_written_s, (last, flood_backlog)) = (written?, quiet?);
    drain?;
    tokio::time::sleep(tail).await;
    let drained_at = probe.drained_at();
    let (flood_ms, flood_unseen) = probe.quiet_latencies(next, last, drained_at);
    let outcome = FairnessOutcome {
        reference_ms,
        flood_ms,
        reference_delivery_ms,
        flood_delivery_ms: probe.quiet_deliveries(next, last, drained_at),
        coalesced: probe.coalesced.load(Ordering::Relaxed),
        unseen: reference_unseen + flood_unseen,
        flood_written_s,
        flood_drained_s: (drained_at.saturating_sub(1).saturating_sub(flood_start)) as f64 / 1e9,
        flood_backlog,
    };
    // Answered while the side still runs: the process exits without tearing it down.
    let _running = (running, baseline);
    match answer(&outcome)? {}
}
