//! The monitoring files (`examples/fleet/deploy/monitoring/`, rendered from the chart, and the chart's Grafana
//! dashboard) use only the metrics the runtime exports.
//!
//! The Grafana dashboard, the alert rules and docs/observability.md are checked against one list of metric
//! names, types and labels (`METRICS`, as `/metrics` exposes them: docs/observability.md). A renamed metric
//! or label fails here until the list and every file that uses it are changed together. The ServiceMonitor
//! cannot be dry-run (the test clusters have no Prometheus Operator CRDs), so it is checked against the
//! Service and Deployment of `deploy/control/`, which `tests/operator/deploy_manifests.rs` dry-runs.

use std::collections::BTreeSet;
use std::path::Path;

mod files;
pub(crate) mod metrics;
mod promql;

use files::{dashboard, exprs, monitoring, panels, read, title, yaml};
use metrics::{METRICS, series_labels};
use promql::{check_expr, ident_char, refs};

#[test]
fn the_lexer_finds_metrics_labels_and_functions() {
    let found = refs(
        r#"histogram_quantile(0.99, sum by (cluster, le) (rate(kubeplex_cluster_ping_seconds_bucket{cluster=~"$cluster", x!="a}b"}[$__rate_interval]))) > bool 0.5 offset 5m"#,
    );
    assert_eq!(
        found.series,
        [(
            "kubeplex_cluster_ping_seconds_bucket".to_owned(),
            vec![
                ("cluster".to_owned(), "$cluster".to_owned()),
                ("x".to_owned(), "a}b".to_owned())
            ]
        )]
    );
    assert_eq!(found.grouping, ["cluster", "le"]);
    assert_eq!(found.functions, ["histogram_quantile", "sum", "rate"]);
    let found = refs("max_over_time(kubeplex_cluster_up[5m]) == 0");
    assert_eq!(found.series, [("kubeplex_cluster_up".to_owned(), vec![])]);
    assert_eq!(found.functions, ["max_over_time"]);
}

#[test]
#[should_panic(expected = "is not a series the operator exports")]
fn a_renamed_metric_fails() {
    check_expr("test", "sum(rate(controller_runtime_reconciles_total[5m]))");
}

#[test]
#[should_panic(expected = "is not a series the operator exports")]
fn a_histogram_without_suffix_fails() {
    check_expr("test", "controller_runtime_reconcile_time_seconds");
}

#[test]
#[should_panic(expected = "has no label context")]
fn a_renamed_label_fails() {
    check_expr("test", r#"kubeplex_cluster_up{context="cluster-b"}"#);
}

#[test]
#[should_panic(expected = "a label none of its metrics has")]
fn grouping_by_an_unknown_label_fails() {
    check_expr("test", "sum by (context) (kubeplex_cluster_up)");
}

#[test]
fn every_panel_queries_known_metrics_only() {
    let dashboard = dashboard();
    let panels = panels(&dashboard);
    assert!(panels.len() >= 9, "only {} panels", panels.len());
    let mut ids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for panel in &panels {
        let title = title(panel);
        assert!(titles.insert(title), "two panels titled {title:?}");
        assert!(
            ids.insert(panel["id"].as_i64().expect("a numeric panel id")),
            "{title}: duplicate id"
        );
        let exprs = exprs(panel);
        assert!(!exprs.is_empty(), "{title}: no target with an expr");
        // The data source is the variable, so the dashboard works with whatever Prometheus it is given.
        assert_eq!(panel["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
            assert_eq!(target["datasource"]["type"], "prometheus", "{title}");
        }
        for expr in exprs {
            let origin = format!("panel {title:?}");
            check_expr(&origin, expr);
            // The $cluster selector filters every series that has a cluster.
            for (series, matchers) in refs(expr).series {
                if series_labels(&series).unwrap().contains("cluster") {
                    assert!(
                        matchers
                            .iter()
                            .any(|(label, value)| label == "cluster" && value == "$cluster"),
                        "{origin}: `{expr}`: {series} is not filtered by cluster=~\"$cluster\""
                    );
                }
            }
        }
        for key in ["x", "y", "w", "h"] {
            assert!(
                panel["gridPos"][key].is_u64(),
                "{title}: gridPos.{key} missing"
            );
        }
    }
}

#[test]
fn the_required_panels_exist() {
    let dashboard = dashboard();
    let panels = panels(&dashboard);
    let required = [
        ("Cluster up", "kubeplex_cluster_up"),
        ("Errors by cluster", "kubeplex_cluster_healthchecks_total"),
        ("Errors by cluster", "kubeplex_children_applied_total"),
        (
            "Reconcile rate by cluster",
            "controller_runtime_reconcile_total",
        ),
        (
            "Reconcile errors by cluster",
            "controller_runtime_reconcile_errors_total",
        ),
        (
            "Reconcile latency p50 / p99",
            "controller_runtime_reconcile_time_seconds_bucket",
        ),
        ("Queue depth", "workqueue_depth"),
        (
            "Cache objects per cluster and kind",
            "kubeplex_cache_objects",
        ),
        ("Blocked deletions", "kubeplex_parent_deletion_blocked"),
        ("Watch restarts", "kubeplex_watch_restarts_total"),
        ("Ping latency p99", "kubeplex_cluster_ping_seconds_bucket"),
    ];
    for (wanted, metric) in required {
        let panel = panels
            .iter()
            .find(|p| title(p) == wanted)
            .unwrap_or_else(|| panic!("no panel titled {wanted:?}"));
        let used: BTreeSet<String> = exprs(panel)
            .into_iter()
            .flat_map(|e| check_expr(wanted, e))
            .collect();
        assert!(used.contains(metric), "{wanted}: does not query {metric}");
    }
    let latency = panels
        .iter()
        .find(|p| title(p) == "Reconcile latency p50 / p99")
        .unwrap();
    let compact: Vec<String> = exprs(latency)
        .iter()
        .map(|e| e.split_whitespace().collect())
        .collect();
    for quantile in ["0.5", "0.99"] {
        let wanted = format!("histogram_quantile({quantile},sumby(cluster,le)");
        assert!(
            compact.iter().any(|e| e.starts_with(&wanted)),
            "the latency panel has no p{quantile} by cluster: {compact:?}"
        );
    }
}

#[test]
fn the_variables_are_the_data_source_and_the_cluster() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    let source = variable("DS_PROMETHEUS");
    assert_eq!(source["type"], "datasource");
    assert_eq!(source["query"], "prometheus");

    let cluster = variable("cluster");
    assert_eq!(cluster["type"], "query");
    assert_eq!(cluster["datasource"]["uid"], "${DS_PROMETHEUS}");
    assert_eq!(cluster["multi"], true);
    assert_eq!(cluster["includeAll"], true);
    // Grafana's `label_values(metric, label)`: the metric must have the label.
    let query = cluster["query"]["query"].as_str().expect("query.query");
    assert_eq!(cluster["definition"], query);
    let (metric, label) = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .and_then(|q| q.split_once(','))
        .unwrap_or_else(|| panic!("not label_values(metric, label): {query}"));
    let labels = series_labels(metric.trim())
        .unwrap_or_else(|| panic!("the cluster variable reads {metric}, which is not exported"));
    assert_eq!(label.trim(), "cluster");
    assert!(labels.contains("cluster"));

    // Import through the UI asks for the data source once.
    assert_eq!(dashboard["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(dashboard["__inputs"][0]["pluginId"], "prometheus");
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
}

#[test]
fn the_alert_rules_parse_and_use_known_metrics() {
    let documents = yaml(&monitoring("alerts.yaml"));
    assert_eq!(documents.len(), 1);
    let rule = &documents[0];
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "kubeplex-system");
    let mut alerts = Vec::new();
    for group in rule["spec"]["groups"].as_array().expect("spec.groups") {
        assert!(group["name"].is_string());
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("alert");
            let expr = rule["expr"].as_str().expect("expr");
            let used = check_expr(&format!("alert {name}"), expr);
            for key in ["summary", "description"] {
                assert!(
                    rule["annotations"][key].is_string(),
                    "{name}: annotations.{key}"
                );
            }
            assert!(rule["labels"]["severity"].is_string(), "{name}: severity");
            alerts.push((name, used, rule["for"].as_str()));
        }
    }
    // What docs/observability.md promises.
    let find = |wanted: &str| {
        alerts
            .iter()
            .find(|(name, _, _)| *name == wanted)
            .unwrap_or_else(|| panic!("no alert {wanted}"))
    };
    let (_, used, duration) = find("KubeplexClusterDown");
    assert!(used.contains("kubeplex_cluster_up"));
    assert_eq!(*duration, Some("5m"));
    let (_, used, duration) = find("KubeplexDeletionBlocked");
    assert!(used.contains("kubeplex_parent_deletion_blocked"));
    assert_eq!(*duration, Some("30m"));
}

#[test]
fn the_service_monitor_scrapes_the_operators_service() {
    let documents = yaml(&monitoring("servicemonitor.yaml"));
    assert_eq!(documents.len(), 1);
    let monitor = &documents[0];
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["kind"], "ServiceMonitor");

    let control = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/control");
    let service = yaml(&control.join("50-service.yaml")).remove(0);
    assert_eq!(service["kind"], "Service");
    let deployment = yaml(&control.join("40-deployment.yaml")).remove(0);
    assert_eq!(deployment["kind"], "Deployment");

    // The ServiceMonitor selects the Service, in its namespace, by a port name it has.
    let namespace = &service["metadata"]["namespace"];
    assert_eq!(&monitor["metadata"]["namespace"], namespace);
    let names = monitor["spec"]["namespaceSelector"]["matchNames"]
        .as_array()
        .expect("namespaceSelector.matchNames");
    assert!(names.contains(namespace));
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector.matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the Service lacks the label {key}={value}"
        );
    }
    let endpoints = monitor["spec"]["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 1);
    let endpoint = &endpoints[0];
    assert_eq!(endpoint["path"], "/metrics");
    let ports = service["spec"]["ports"].as_array().expect("ports");
    let port = ports
        .iter()
        .find(|p| p["name"] == endpoint["port"])
        .unwrap_or_else(|| panic!("the Service has no port named {}", endpoint["port"]));

    // The Service reaches the secure metrics port the operator serves /metrics on, over HTTPS with the
    // scraper's token (no Pod annotation: annotation-based discovery presents no token).
    let pod = &deployment["spec"]["template"];
    for (key, value) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(&pod["metadata"]["labels"][key], value);
    }
    let container = &pod["spec"]["containers"][0];
    let metrics = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port["targetPort"])
        .unwrap_or_else(|| panic!("no container port named {}", port["targetPort"]));
    let number = metrics["containerPort"].as_i64().unwrap().to_string();
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let flag = args
        .iter()
        .position(|a| *a == "--secure-metrics-port")
        .expect("the operator serves secure metrics");
    assert_eq!(args.get(flag + 1), Some(&number.as_str()));
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert!(
        pod["metadata"]["annotations"]["prometheus.io/scrape"].is_null()
            && service["metadata"]["annotations"]["prometheus.io/scrape"].is_null(),
        "a scrape by annotation presents no token"
    );
}

#[test]
fn the_docs_describe_every_metric_and_no_other() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/observability.md");
    let doc = read(&path);
    for &(name, _, _) in METRICS {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/observability.md does not describe {name}"
        );
    }
    // Names with the metrics' prefixes that are not metrics would be stale documentation.
    let words = doc.split(|c: char| !ident_char(c));
    for word in words {
        if [
            "controller_runtime_",
            "workqueue_",
            "kubeplex_cluster_",
            "kubeplex_watch_",
            "kubeplex_cache_",
            "kubeplex_children_",
            "kubeplex_parent_",
            "kubeplex_member_",
        ]
        .iter()
        .any(|prefix| word.starts_with(prefix))
        {
            assert!(
                series_labels(word).is_some() || METRICS.iter().any(|(name, _, _)| *name == word),
                "docs/observability.md names {word}, which is not exported"
            );
        }
    }
}
