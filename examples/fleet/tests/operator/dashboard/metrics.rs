//! The metrics `/metrics` exposes (names, types and labels), and the labels of each series name PromQL sees:
//! the one list the monitoring files and docs are checked against (here), and a real scrape too
//! (`tests/operator/metrics.rs`).

use std::collections::BTreeSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric `/metrics` exposes: name (counters with their `_total`), type, labels.
pub(crate) const METRICS: &[(&str, Type, &[&str])] = &[
    // controller-runtime compatible, plus `cluster`.
    (
        "controller_runtime_reconcile_total",
        Type::Counter,
        &["controller", "cluster", "result"],
    ),
    (
        "controller_runtime_reconcile_errors_total",
        Type::Counter,
        &["controller", "cluster"],
    ),
    (
        "controller_runtime_reconcile_panics_total",
        Type::Counter,
        &["controller", "cluster"],
    ),
    (
        "controller_runtime_reconcile_time_seconds",
        Type::Histogram,
        &["controller", "cluster"],
    ),
    (
        "controller_runtime_active_workers",
        Type::Gauge,
        &["controller"],
    ),
    (
        "controller_runtime_max_concurrent_reconciles",
        Type::Gauge,
        &["controller"],
    ),
    // The work queue, per controller (`name` is the controller's name).
    ("workqueue_depth", Type::Gauge, &["name", "controller"]),
    (
        "workqueue_adds_total",
        Type::Counter,
        &["name", "controller"],
    ),
    (
        "workqueue_queue_duration_seconds",
        Type::Histogram,
        &["name", "controller"],
    ),
    (
        "workqueue_work_duration_seconds",
        Type::Histogram,
        &["name", "controller"],
    ),
    (
        "workqueue_retries_total",
        Type::Counter,
        &["name", "controller"],
    ),
    (
        "workqueue_longest_running_processor_seconds",
        Type::Gauge,
        &["name", "controller"],
    ),
    (
        "workqueue_unfinished_work_seconds",
        Type::Gauge,
        &["name", "controller"],
    ),
    // Keys waiting per cluster or member (fair dispatch's groups).
    (
        "kubeplex_queue_depth",
        Type::Gauge,
        &["controller", "cluster"],
    ),
    // Children in each cluster's cache by their health.
    (
        "kubeplex_children",
        Type::Gauge,
        &["controller", "cluster", "health"],
    ),
    // kubeplex's own, per cluster.
    ("kubeplex_cluster_up", Type::Gauge, &["cluster"]),
    (
        "kubeplex_cluster_healthchecks_total",
        Type::Counter,
        &["cluster", "result"],
    ),
    (
        "kubeplex_cluster_ping_seconds",
        Type::Histogram,
        &["cluster"],
    ),
    (
        "kubeplex_watch_events_total",
        Type::Counter,
        &["cluster", "kind", "namespace", "type"],
    ),
    (
        "kubeplex_watch_restarts_total",
        Type::Counter,
        &["cluster", "kind", "namespace", "reason"],
    ),
    (
        "kubeplex_cache_objects",
        Type::Gauge,
        &["cluster", "kind", "namespace"],
    ),
    (
        "kubeplex_cache_last_event_age_seconds",
        Type::Gauge,
        &["cluster", "kind", "namespace"],
    ),
    (
        "kubeplex_children_applied_total",
        Type::Counter,
        &["controller", "cluster", "kind", "result"],
    ),
    (
        "kubeplex_children_pruned_total",
        Type::Counter,
        &["controller", "cluster", "kind"],
    ),
    (
        "kubeplex_parent_deletion_blocked",
        Type::Gauge,
        &["controller", "cluster"],
    ),
    (
        "kubeplex_member_changes_total",
        Type::Counter,
        &["change", "result"],
    ),
    ("kubeplex_member_changes_in_flight", Type::Gauge, &[]),
    ("kubeplex_member_changes_waiting", Type::Gauge, &[]),
];

/// The labels of a series name as PromQL sees it (a histogram's `_bucket` has `le` too), or `None` when no
/// exported metric has series of that name (a histogram's bare name has none).
pub(crate) fn series_labels(series: &str) -> Option<BTreeSet<&'static str>> {
    for &(name, kind, labels) in METRICS {
        let mut labels: BTreeSet<&'static str> = labels.iter().copied().collect();
        if kind != Type::Histogram {
            if series == name {
                return Some(labels);
            }
            continue;
        }
        match series.strip_prefix(name) {
            Some("_bucket") => {
                labels.insert("le");
                return Some(labels);
            }
            Some("_sum" | "_count") => return Some(labels),
            _ => {}
        }
    }
    None
}
