//! The `__child_cache` process of section `child_cache` ([`super::heap`]): a kubeplex operator whose
//! ConfigMap parents each want K Deployments, caching them by metadata or whole; it waits until every child
//! exists and was applied and the writes have stopped, settles, and prints one [`CacheOutcome`] line with its heap.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::config::Kubeconfig;
use kubeplex::{
    Child, ContextName, Controller, Cx, Manager, Plan, Reconcile, ownership::CONTROLLER_LABEL,
};

use super::heap::{
    CHILD_CLUSTER, CONTROLLER, Cache, CacheOutcome, CacheSpec, EMPTY_NAMESPACE, NAMESPACE,
    PARENT_CLUSTER, WAIT,
};
use crate::fleet::{FleetApp, FleetAppSpec, deployment_for};
use crate::harness::{answer, wait_started};
use crate::system::{live_bytes, rss_bytes};

static PLAN: OnceLock<Plan<ContextName>> = OnceLock::new();

struct CacheBench {
    children: ContextName,
    namespace: &'static str,
    per_parent: usize,
    reconciled: Arc<AtomicUsize>,
}

impl Controller for CacheBench {
    type Resource = ConfigMap;
    type Context = ContextName;
    fn plan() -> Plan<ContextName> {
        PLAN.get()
            .expect("the plan is set before the manager starts")
            .clone()
    }
}

impl Reconcile for CacheBench {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        parent: Arc<ConfigMap>,
        cx: &Cx<ContextName>,
    ) -> Result<kubeplex::Action, Self::Error> {
        let name = parent.metadata.name.clone().unwrap_or_default();
        for i in 0..self.per_parent {
            cx.child(self.children, child_of(&name, i, self.namespace))?;
        }
        self.reconciled.fetch_add(1, Ordering::Relaxed);
        Ok(kubeplex::Action::await_change())
    }
}

/// Child `i` of the parent `name`: a Deployment as the fleet's children are, named for both.
fn child_of(name: &str, i: usize, namespace: &str) -> Deployment {
    let app = FleetApp::new(
        name,
        FleetAppSpec {
            image: "registry.example/app:1.0".into(),
            replicas: 1,
            namespaces: Vec::new(),
        },
    );
    let mut deployment = deployment_for(&app, namespace);
    deployment.metadata.name = Some(format!("{name}-{i}"));
    deployment
}

/// The `__child_cache` process: runs the operator, waits, prints one [`CacheOutcome`] line.
pub(crate) async fn main(started: Instant, spec: &str) -> Result<(), String> {
    let spec: CacheSpec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    let kubeconfig = Kubeconfig::read_from(&spec.kubeconfig).map_err(|e| e.to_string())?;
    let (namespace, per_parent) = match spec.cache {
        Cache::Empty => (EMPTY_NAMESPACE, 0),
        Cache::Metadata | Cache::Objects => (NAMESPACE, spec.per_parent),
    };
    // The counting is this process's own: its client and connection exist before the first reading.
    let client = crate::child::client_for(&kubeconfig, CHILD_CLUSTER).await?;
    let lister: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels(&format!("{CONTROLLER_LABEL}={CONTROLLER}"));
    let count = || async {
        lister
            .list_metadata(&selector)
            .await
            .map(|list| list.items.len())
            .map_err(|e| format!("listing the children: {e}"))
    };
    count().await?;
    let applied = || applied_deployments(client.clone());
    let applied_before = applied().await?;

    let heap_before = live_bytes() as u64;
    let rss_before = rss_bytes();
    let (parents, children) = (ContextName::new("parents"), ContextName::new("children"));
    let mut owned = Child::of::<Deployment>()
        .with_contexts([children])
        .with_namespaces([namespace]);
    if spec.cache == Cache::Objects {
        owned = owned.cache_objects();
    }
    let plan = Plan::new(CONTROLLER)
        .with_contexts([parents])
        .with_namespaces([NAMESPACE])
        .owns(owned);
    PLAN.set(plan)
        .map_err(|_| "the plan was already set".to_owned())?;
    let reconciled = Arc::new(AtomicUsize::new(0));
    // Its two contexts may share one server, on purpose.
    let running = Manager::with_kubeconfig(kubeconfig)
        .probes("127.0.0.1:0")
        .allow_duplicate_clusters()
        .context_alias(parents, PARENT_CLUSTER)
        .context_alias(children, CHILD_CLUSTER)
        .controller(CacheBench {
            children,
            namespace,
            per_parent,
            reconciled: reconciled.clone(),
        })
        .start()
        .await
        .map_err(|e| e.to_string())?;
    wait_started(&running, WAIT).await?;
    let synced_s = started.elapsed().as_secs_f64();
    let expected = spec.parents * per_parent;
    let waited = Instant::now();
    let step = Duration::from_millis(spec.step_ms);
    // Every parent reconciled and every child applied once: the reconciles' writes are done, and what is
    // left on the heap is what the process keeps.
    // Then the writes have stopped: the applies the server counted and the reconciles both stayed the same
    // over the last readings, so no request is in flight when the heap is read.
    let mut quiet: Vec<(f64, usize)> = Vec::new();
    let children = loop {
        let children = count().await?;
        let (applies, reconciles) = (
            applied().await? - applied_before,
            reconciled.load(Ordering::Relaxed),
        );
        if children >= expected && reconciles >= spec.parents && applies >= expected as f64 {
            quiet.push((applies, reconciles));
            if writes_stopped(&quiet) {
                break children;
            }
        } else {
            quiet.clear();
        }
        if waited.elapsed() > WAIT {
            return Err(format!(
                "{children} of {expected} children, {reconciles} of {} parents reconciled in time \
                 ({applies} applies)",
                spec.parents
            ));
        }
        tokio::time::sleep(step).await;
    };
    let settled_s = settle(Duration::from_millis(spec.settle_ms), step).await;
    let outcome = CacheOutcome {
        settled_s,
        synced_s,
        children,
        heap_before,
        heap_after: live_bytes() as u64,
        rss_before,
        rss_after: rss_bytes(),
    };
    match answer(&outcome)? {}
}

/// How many readings of the applies and reconciles in a row must agree.
const QUIET_READINGS: usize = 4;

/// Whether the last [`QUIET_READINGS`] readings of (applies, reconciles) are all the same.
fn writes_stopped(readings: &[(f64, usize)]) -> bool {
    readings.len() >= QUIET_READINGS
        && readings[readings.len() - QUIET_READINGS..]
            .windows(2)
            .all(|pair| pair[0] == pair[1])
}

/// How many readings of the heap in a row must agree.
const SETTLE_READINGS: usize = 4;
/// Readings agree when they are within this fraction of each other.
const SETTLE_SPREAD: f64 = 0.02;

/// Waits at least `least`, then until the heap has stopped falling (the last readings, `step` apart,
/// agree, or 60 s); returns the seconds it waited. The reconciles' transient memory is freed up to
/// seconds after their last write, later in some runs than in others.
async fn settle(least: Duration, step: Duration) -> f64 {
    let start = Instant::now();
    tokio::time::sleep(least).await;
    let mut readings: Vec<f64> = Vec::new();
    while start.elapsed() < Duration::from_secs(60) {
        readings.push(live_bytes() as f64);
        if settled(&readings) {
            break;
        }
        tokio::time::sleep(step).await;
    }
    start.elapsed().as_secs_f64()
}

/// Whether the last [`SETTLE_READINGS`] readings are within [`SETTLE_SPREAD`] of each other.
pub(crate) fn settled(readings: &[f64]) -> bool {
    let Some(last) = readings
        .len()
        .checked_sub(SETTLE_READINGS)
        .map(|i| &readings[i..])
    else {
        return false;
    };
    let (low, high) = last
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    high - low <= SETTLE_SPREAD * high
}

/// Server-side applies of Deployments the server has answered so far (`apiserver_request_total`).
async fn applied_deployments(client: Client) -> Result<f64, String> {
    let text = crate::system::server_metrics(&client).await?;
    Ok(count_applies(&text))
}

fn count_applies(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .filter(|(labels, _)| {
            let labels: Vec<&str> = labels.split(',').collect();
            labels.contains(&"verb=\"APPLY\"") && labels.contains(&"resource=\"deployments\"")
        })
        .map(|(_, value)| value.trim().parse::<f64>().unwrap_or(0.0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_has_settled_when_the_last_readings_agree() {
        assert!(!settled(&[100.0, 100.0, 100.0]));
        assert!(!settled(&[300.0, 200.0, 100.0, 100.0, 100.0]));
        assert!(settled(&[300.0, 101.0, 100.0, 100.0, 100.0]));
        assert!(!settled(&[100.0, 100.0, 100.0, 90.0]));
    }

    #[test]
    fn the_writes_have_stopped_when_the_last_readings_are_the_same() {
        assert!(!writes_stopped(&[(10.0, 5), (10.0, 5), (10.0, 5)]));
        assert!(writes_stopped(&[
            (9.0, 5),
            (10.0, 5),
            (10.0, 5),
            (10.0, 5),
            (10.0, 5)
        ]));
        assert!(!writes_stopped(&[
            (10.0, 5),
            (10.0, 5),
            (10.0, 5),
            (12.0, 5)
        ]));
        assert!(!writes_stopped(&[
            (10.0, 5),
            (10.0, 5),
            (10.0, 5),
            (10.0, 6)
        ]));
    }

    #[test]
    fn applies_of_deployments_are_counted_from_the_metrics() {
        let metrics = "# HELP apiserver_request_total Counter\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"apps\",resource=\"deployments\",scope=\"resource\",subresource=\"\",verb=\"APPLY\",version=\"v1\"} 12\n\
            apiserver_request_total{code=\"201\",component=\"apiserver\",group=\"apps\",resource=\"deployments\",scope=\"resource\",subresource=\"\",verb=\"APPLY\",version=\"v1\"} 3\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"apps\",resource=\"deployments\",scope=\"resource\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 40\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"APPLY\",version=\"v1\"} 7\n";
        assert_eq!(count_applies(metrics), 15.0);
    }
}
