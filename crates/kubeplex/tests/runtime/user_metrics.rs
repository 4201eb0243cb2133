//! A metric the user registers with `Manager::register_metrics` is served on `/metrics` with kubeplex's own:
//! a counter that a reconciler increments, scraped over HTTP from the running manager's probe server, next
//! to kubeplex's figures for the same reconciles. One real cluster: without a controller and a context,
//! kubeplex's families have no samples (and are not written at all), so there would be nothing of its own to
//! find beside the user's.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::support::{Fleet, WAIT, create_namespace, put_config_map, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::prometheus_client::metrics::counter::Counter;
use kubeplex::{Action, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::eventually;

const NAMESPACE: &str = "user-metrics";

/// Counts the apps it reconciles in a counter of the user's, as docs/observability.md shows.
struct Deployer {
    deployed: Counter<u64>,
}
impl Controller for Deployer {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("deployer")
            .with_contexts([Fleet::ClusterA])
            .with_namespaces([NAMESPACE])
    }
}
impl Reconcile for Deployer {
    type Error = Infallible;
    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Infallible> {
        self.deployed.inc();
        Ok(Action::await_change())
    }
}

/// GETs `/metrics` with a plain HTTP/1.1 request; returns the body, after checking the status and type.
async fn scrape(address: SocketAddr) -> String {
    let response = crate::support::http_get(address, "/metrics").await;
    let (head, body) = (response.head, response.body);
    assert_eq!(response.code, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    body
}

/// The value of `name`'s sample whose labels include each of `labels` (`key="value"`), if there is one.
fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    body.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (found, set) = series.split_once('{').unwrap_or((series, ""));
        let set: Vec<&str> = set.trim_end_matches('}').split(',').collect();
        (found == name && labels.iter().all(|label| set.contains(label)))
            .then(|| value.parse().unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_metric_is_served_with_kubeplexs_own() {
    let env = crate::support::clusters([]).await;
    let client = env.client("cluster-a").await.unwrap();
    create_namespace(&client, NAMESPACE).await;
    let deployed = Counter::<u64>::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .register_metrics(|registry| {
            registry.register("myapp_deployed", "Apps deployed", deployed.clone())
        })
        .controller(Deployer {
            deployed: deployed.clone(),
        })
        .probes("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    wait_started(&running, "started in time").await;
    let address = running.probe_address().unwrap();
    for app in ["app-1", "app-2"] {
        put_config_map(&client, NAMESPACE, app, "v1").await;
    }

    // The user's counter, incremented in the reconciler, counts what kubeplex counts in the same scrape:
    // each app reconciled once (nothing changes them again).
    let reconciles = [
        r#"controller="deployer""#,
        r#"cluster="cluster-a""#,
        r#"result="success""#,
    ];
    let body = eventually("two apps deployed and reconciled", WAIT, async || {
        let body = scrape(address).await;
        let mine = sample(&body, "myapp_deployed_total", &[]);
        let kubeplexs = sample(&body, "controller_runtime_reconcile_total", &reconciles);
        if mine == Some(2.0) && kubeplexs == Some(2.0) {
            Ok(body)
        } else {
            Err(format!(
                "myapp_deployed_total {mine:?}, reconciles {kubeplexs:?}:\n{body}"
            ))
        }
    })
    .await;
    assert!(
        body.contains("# HELP myapp_deployed Apps deployed.\n# TYPE myapp_deployed counter\n"),
        "{body}"
    );
    assert_eq!(deployed.get(), 2);

    // kubeplex's own families are all still there in the same exposition, which ends as OpenMetrics requires.
    let up = sample(&body, "kubeplex_cluster_up", &[r#"cluster="cluster-a""#]);
    assert_eq!(up, Some(1.0), "{body}");
    let watch = [r#"cluster="cluster-a""#, r#"namespace="user-metrics""#];
    let cached = sample(&body, "kubeplex_cache_objects", &watch);
    assert_eq!(cached, Some(2.0), "{body}");
    for family in [
        "controller_runtime_reconcile_time_seconds histogram",
        "workqueue_adds counter",
        "kubeplex_watch_events counter",
    ] {
        let line = format!("# TYPE {family}");
        assert!(body.lines().any(|l| l == line), "{line}:\n{body}");
    }
    assert!(body.ends_with("# EOF\n"), "{body}");
    crate::support::stop(running).await;
}
