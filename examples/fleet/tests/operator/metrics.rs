//! `/metrics` during the scenario, on real clusters, read the way Prometheus reads it: every scrape must
//! parse as OpenMetrics (with a parser, not a regex), and the figures follow what happens to each context —
//! reconciles counted when parents are created, a frozen child cluster's `kubeplex_cluster_up` dropping to 0
//! while the other stays 1, and `kubeplex_parent_deletion_blocked` held at 1 while a parent's deletion
//! waits on a stopped cluster, then back to 0. cluster-b is frozen and stopped for the operator alone,
//! behind a relay that holds its bytes (as a frozen server does) or refuses its connections (as a stopped
//! one does).

use std::net::SocketAddr;
use std::time::Duration;

use crate::dashboard::metrics::{METRICS, Type};
use crate::support::{WAIT, stage};
use kube::api::DeleteParams;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::Polling;
use kubeplex_testenv::{HttpResponse as Response, http_get};
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};

/// Pings this often, so a frozen cluster shows within seconds (the 5 s ping timeout included).
const PING: Duration = Duration::from_secs(1);
const CONTROLLER: &str = "app-deployer";

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// Scrapes `/metrics` with a plain HTTP/1.1 request and parses the body as OpenMetrics.
async fn scrape(address: SocketAddr) -> Exposition {
    let response = http_get(address, "/metrics").await;
    let Response { code, head, body } = response.unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(code, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    openmetrics_parser::openmetrics::parse_openmetrics(&body)
        .unwrap_or_else(|error| panic!("/metrics is not valid OpenMetrics ({error:?}):\n{body}"))
}

/// Checks a real scrape against the list the dashboard, the alerts and the docs are checked against
/// (`tests/operator/dashboard/metrics.rs`): every runtime family on the list is exposed with its type, each with
/// series has exactly the listed labels, and no runtime family is exposed that the list lacks.
fn exposed_as_listed(metrics: &Exposition) {
    let runtime = |name: &str| {
        ["kubeplex_", "controller_runtime_", "workqueue_"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
    };
    for (listed, kind, labels) in METRICS {
        // OpenMetrics names a counter's family without the `_total` of its samples.
        let family_name = match kind {
            Type::Counter => listed.strip_suffix("_total").unwrap_or(listed),
            _ => listed,
        };
        // A family without series is not in the exposition: member changes come with the first member
        // change, and the scenario has no members; the depth per context only while keys wait, which a
        // scrape of a settled operator does not see (the executor's unit tests scrape it).
        if ["kubeplex_member_changes_total", "kubeplex_queue_depth"].contains(listed) {
            continue;
        }
        let family = metrics
            .families
            .get(family_name)
            .unwrap_or_else(|| panic!("{listed} is listed but not exposed"));
        let exposed = match family.family_type {
            OpenMetricsType::Counter => Type::Counter,
            OpenMetricsType::Gauge => Type::Gauge,
            OpenMetricsType::Histogram => Type::Histogram,
            ref other => panic!("{listed} is exposed as a {other:?}"),
        };
        assert_eq!(exposed, *kind, "{listed}'s type");
        if family.iter_samples().next().is_some() {
            let mut names: Vec<&str> = family
                .get_label_names()
                .iter()
                .map(String::as_str)
                .filter(|name| *name != "le")
                .collect();
            names.sort_unstable();
            let mut expected = labels.to_vec();
            expected.sort_unstable();
            assert_eq!(names, expected, "{listed}'s labels");
        }
    }
    for name in metrics.families.keys().filter(|name| runtime(name)) {
        assert!(
            METRICS.iter().any(
                |(listed, _, _)| listed.strip_suffix("_total").unwrap_or(listed) == name.as_str()
                    || *listed == name.as_str()
            ),
            "{name} is exposed but not in tests/operator/dashboard/metrics.rs (nor, then, in the docs' list)"
        );
    }
}

/// The value of `family`'s sample whose labels include `labels` (counters, gauges), if any.
fn value(metrics: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    values(metrics, family, labels).next()
}

/// The values of `family`'s samples whose labels include `labels`.
fn values<'m>(
    metrics: &'m Exposition,
    family: &str,
    labels: &'m [(&str, &str)],
) -> impl Iterator<Item = f64> + 'm {
    let samples = metrics
        .families
        .get(family)
        .into_iter()
        .flat_map(|f| f.iter_samples());
    samples.filter_map(move |sample| {
        let set = sample.get_labelset().ok()?;
        if !labels
            .iter()
            .all(|(k, v)| set.get_label_value(k) == Some(*v))
        {
            return None;
        }
        match &sample.value {
            OpenMetricsValue::Counter(counter) => Some(counter.value.as_f64()),
            OpenMetricsValue::Gauge(gauge) => Some(gauge.as_f64()),
            OpenMetricsValue::Histogram(histogram) => histogram.count.map(|c| c as f64),
            _ => None,
        }
    })
}

/// Scrapes until `check` accepts the figures; panics with its last complaint after `WAIT`.
async fn eventually(
    address: SocketAddr,
    what: &str,
    check: impl Fn(&Exposition) -> Result<(), String>,
) -> Exposition {
    let polling = Polling::within(WAIT).every(Duration::from_millis(250));
    kubeplex_testenv::eventually(what, polling, async || {
        let metrics = scrape(address).await;
        check(&metrics).map(|()| metrics)
    })
    .await
}

fn expect(
    metrics: &Exposition,
    family: &str,
    labels: &[(&str, &str)],
    wanted: f64,
) -> Result<(), String> {
    match value(metrics, family, labels) {
        Some(found) if found == wanted => Ok(()),
        found => Err(format!("{family}{labels:?} is {found:?}, not {wanted}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_follow_each_cluster_through_the_scenario() {
    let mut stage = stage("metrics").await;
    let b = stage.relay(Fleet::ClusterB).await;
    let manager = stage.manager().probes("127.0.0.1:0").ping_interval(PING);
    let running = crate::support::started(manager).await;
    let address = running.probe_address().unwrap();
    // Every result (the example asks to run again in an hour: `requeue`) of the control context.
    let reconciles = |m: &Exposition| {
        let labels = [("controller", CONTROLLER), ("cluster", "control")];
        values(m, "controller_runtime_reconcile", &labels).sum::<f64>()
    };
    let before = reconciles(&scrape(address).await);

    // Parents created: reconciles of the control context are counted, children applied in both clusters.
    for name in ["metrics-1", "metrics-2", "metrics-3"] {
        stage.apply(name, "nginx:1.27", 1).await;
    }
    eventually(address, "reconciles and children counted", |m| {
        let after = reconciles(m);
        if after < before + 3.0 {
            return Err(format!("reconciles {before} -> {after}"));
        }
        for cluster in ["cluster-a", "cluster-b"] {
            let labels = [
                ("controller", CONTROLLER),
                ("cluster", cluster),
                ("kind", "Deployment.apps/v1"),
                ("result", "success"),
            ];
            // Three parents, a child in each of two namespaces.
            let applied = value(m, "kubeplex_children_applied", &labels).unwrap_or(0.0);
            if applied < 6.0 {
                return Err(format!("{cluster}: {applied} children applied"));
            }
        }
        Ok(())
    })
    .await;
    let metrics = eventually(address, "every cluster up and pinged", |m| {
        for cluster in ["control", "cluster-a", "cluster-b"] {
            expect(m, "kubeplex_cluster_up", &[("cluster", cluster)], 1.0)?;
            let labels = [("cluster", cluster), ("result", "success")];
            if value(m, "kubeplex_cluster_healthchecks", &labels).unwrap_or(0.0) < 1.0 {
                return Err(format!("{cluster} not pinged yet"));
            }
        }
        Ok(())
    })
    .await;
    let time = value(
        &metrics,
        "controller_runtime_reconcile_time_seconds",
        &[("cluster", "control")],
    );
    assert!(
        time.unwrap_or(0.0) >= 3.0,
        "reconcile time observed: {time:?}"
    );
    let cached = value(
        &metrics,
        "kubeplex_cache_objects",
        &[
            ("cluster", "cluster-a"),
            ("kind", "Deployment.apps/v1"),
            ("namespace", stage.children[0].as_str()),
        ],
    );
    assert!(
        cached.unwrap_or(0.0) >= 3.0,
        "cluster-a's cache: {cached:?}"
    );

    // A frozen child cluster is down within the probe period; the other stays up. At worst a ping of
    // cluster-b was answered just before the freeze: the next one starts a ping interval later (`PING`)
    // and gives up after kubeplex's ping timeout (`kubeplex::readiness::PING_TIMEOUT`), and `kubeplex_cluster_up` is
    // read from that result at the next scrape. 5 s more covers this test's polling (a scrape every
    // 250 ms) and a loaded machine, where the wait below would allow `WAIT` (60 s).
    const SLACK: Duration = Duration::from_secs(5);
    let within = PING + kubeplex::readiness::PING_TIMEOUT + SLACK;
    b.cut();
    let frozen = tokio::time::Instant::now();
    let metrics = eventually(address, "cluster-b down while frozen", |m| {
        expect(m, "kubeplex_cluster_up", &[("cluster", "cluster-b")], 0.0)
    })
    .await;
    let took = frozen.elapsed();
    assert!(
        took <= within,
        "cluster-b's kubeplex_cluster_up dropped {took:?} after the freeze, not within {within:?}"
    );
    // The scrape that showed cluster-b down shows cluster-a still up.
    let a_up = value(&metrics, "kubeplex_cluster_up", &[("cluster", "cluster-a")]);
    assert_eq!(a_up, Some(1.0), "cluster-a while cluster-b is frozen");
    b.open();
    eventually(address, "cluster-b up when thawed", |m| {
        expect(m, "kubeplex_cluster_up", &[("cluster", "cluster-b")], 1.0)
    })
    .await;

    // A parent deleted while cluster-b is stopped waits for it: blocked 1, and 0 once it is back.
    let blocked = [("controller", CONTROLLER), ("cluster", "cluster-b")];
    b.refuse();
    let apps = stage.apps().await;
    apps.delete("metrics-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually(address, "deletion blocked on cluster-b", |m| {
        expect(m, "kubeplex_parent_deletion_blocked", &blocked, 1.0)?;
        expect(m, "kubeplex_cluster_up", &[("cluster", "cluster-b")], 0.0)
    })
    .await;
    b.open();
    eventually(address, "deletion unblocked", |m| {
        expect(m, "kubeplex_parent_deletion_blocked", &blocked, 0.0)
    })
    .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while apps.get_opt("metrics-1").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "metrics-1 is deleted once cluster-b is back"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // After the scenario (reconciles, a frozen cluster, a blocked deletion) every family has series.
    exposed_as_listed(&scrape(address).await);

    for name in ["metrics-2", "metrics-3"] {
        apps.delete(name, &DeleteParams::default()).await.unwrap();
    }
    crate::support::stop(running).await;
}
