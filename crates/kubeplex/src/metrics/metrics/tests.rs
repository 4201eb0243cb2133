use std::sync::atomic::Ordering;

use super::*;
use crate::core::Action;

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[test]
fn reconciles_are_counted_per_context_and_result() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.reconciled(
        "apps",
        "cluster-a",
        Verdict::Done(Action::await_change()),
        Duration::from_millis(20),
    );
    metrics.reconciled(
        "apps",
        "cluster-a",
        Verdict::Done(Action::requeue(Duration::from_secs(1))),
        Duration::from_millis(20),
    );
    metrics.reconciled(
        "apps",
        "cluster-b",
        Verdict::Failed(Action::requeue(Duration::from_secs(5))),
        Duration::from_secs(2),
    );
    metrics.panicked("apps", "cluster-b");
    let text = scrape(&registry);
    for line in [
        r#"controller_runtime_reconcile_total{controller="apps",cluster="cluster-a",result="success"} 1"#,
        r#"controller_runtime_reconcile_total{controller="apps",cluster="cluster-a",result="requeue"} 1"#,
        r#"controller_runtime_reconcile_total{controller="apps",cluster="cluster-b",result="error"} 2"#,
        r#"controller_runtime_reconcile_errors_total{controller="apps",cluster="cluster-b"} 2"#,
        r#"controller_runtime_reconcile_panics_total{controller="apps",cluster="cluster-b"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="0.025",controller="apps",cluster="cluster-a"} 2"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="apps",cluster="cluster-b"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test(start_paused = true)]
async fn running_times_and_watch_ages_are_read_at_scrape_time() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let queue = metrics.queue("apps", Some(4));
    let watch = metrics.watch("cluster-a", "Deployment.apps/v1", Some("team-a"));
    let first = queue.running.start();
    tokio::time::advance(Duration::from_secs(3)).await;
    let _second = queue.running.start();
    tokio::time::advance(Duration::from_secs(1)).await;
    let text = scrape(&registry);
    let labels = r#"{name="apps",controller="apps"}"#;
    assert!(
        text.contains(&format!(
            "workqueue_longest_running_processor_seconds{labels} 4.0"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("workqueue_unfinished_work_seconds{labels} 5.0")),
        "{text}"
    );
    let age = r#"kubeplex_cache_last_event_age_seconds{cluster="cluster-a",kind="Deployment.apps/v1",namespace="team-a"}"#;
    assert!(text.contains(&format!("{age} 4.0")), "{text}");
    assert!(
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="apps"} 4"#),
        "{text}"
    );

    watch.event();
    queue.running.finish(first);
    tokio::time::advance(Duration::from_secs(2)).await;
    let text = scrape(&registry);
    assert!(text.contains(&format!("{age} 2.0")), "{text}");
    assert!(
        text.contains(&format!(
            "workqueue_longest_running_processor_seconds{labels} 3.0"
        )),
        "{text}"
    );

    // A watch that ends drops out of the scrape.
    drop(watch);
    assert!(!scrape(&registry).contains(age));
}

#[test]
fn context_up_comes_from_the_health_report_at_scrape_time() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let read = up.clone();
    metrics.contexts_up(move || {
        vec![
            ("cluster-a".into(), true),
            ("cluster-b".into(), read.load(Ordering::Relaxed)),
        ]
    });
    assert!(scrape(&registry).contains(r#"kubeplex_cluster_up{cluster="cluster-b"} 1"#));
    up.store(false, Ordering::Relaxed);
    let text = scrape(&registry);
    assert!(
        text.contains(r#"kubeplex_cluster_up{cluster="cluster-b"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"kubeplex_cluster_up{cluster="cluster-a"} 1"#),
        "{text}"
    );
}

#[test]
fn blocked_deletions_count_parents_per_context_until_unblocked_or_gone() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let gauge = |context: &str| {
        let text = scrape(&registry);
        let series = format!(
            r#"kubeplex_parent_deletion_blocked{{controller="apps",cluster="{context}"}} "#
        );
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    metrics.deletion_blocked("apps", "cluster-b", "crds/a", true);
    // A retry of the same blocked parent is not a second one.
    metrics.deletion_blocked("apps", "cluster-b", "crds/a", true);
    metrics.deletion_blocked("apps", "cluster-b", "crds/b", true);
    metrics.deletion_blocked("apps", "cluster-a", "crds/a", false);
    assert_eq!(gauge("cluster-b"), "2");
    metrics.deletion_blocked("apps", "cluster-b", "crds/a", false);
    assert_eq!(gauge("cluster-b"), "1");
    // A parent that goes another way (its finalizer removed by hand) is not held for ever.
    metrics.parent_gone("apps", "crds/b");
    assert_eq!(gauge("cluster-b"), "0");
}

#[test]
fn a_started_controllers_error_series_exist_at_zero() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.controller_started("apps", ["control"]);
    let text = scrape(&registry);
    for line in [
        r#"controller_runtime_reconcile_total{controller="apps",cluster="control",result="error"} 0"#,
        r#"controller_runtime_reconcile_errors_total{controller="apps",cluster="control"} 0"#,
        r#"controller_runtime_reconcile_panics_total{controller="apps",cluster="control"} 0"#,
        r#"workqueue_retries_total{name="apps",controller="apps"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn a_context_that_left_has_no_series_in_any_family() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    for context in ["cluster-a", "member-m"] {
        metrics.controller_started("apps", [context]);
        metrics.reconciled(
            "apps",
            context,
            Verdict::Failed(Action::requeue(Duration::from_secs(5))),
            Duration::from_millis(20),
        );
        metrics.panicked("apps", context);
        metrics.pinged(context, true, Duration::from_millis(3));
        metrics.pinged(context, false, Duration::from_secs(5));
        metrics.children_applied("apps", context, "ConfigMap.v1", "success", 2);
        metrics.children_pruned("apps", context, "ConfigMap.v1", 1);
        metrics.deletion_blocked("apps", context, "ns/web", true);
    }
    let kept = metrics.watch("cluster-a", "ConfigMap.v1", Some("apps"));
    let left = metrics.watch("member-m", "ConfigMap.v1", Some("apps"));
    for watch in [&kept, &left] {
        watch.applied.inc();
        watch.restarted("unreachable");
    }
    let text = scrape(&registry);
    assert!(
        text.contains(r#"kubeplex_watch_events_total{cluster="member-m""#),
        "{text}"
    );
    drop(left);
    metrics.context_left("member-m");
    let text = scrape(&registry);
    let families: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.contains(r#"cluster="member-m""#))
        .map(|l| l.split('{').next().unwrap_or(l))
        .collect();
    assert!(
        families.is_empty(),
        "series still name the member: {families:?}\n{text}"
    );
    // Every family the member was in still has the cluster that stayed.
    for family in [
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_time_seconds_count",
        "kubeplex_cluster_healthchecks_total",
        "kubeplex_cluster_ping_seconds_count",
        "kubeplex_watch_events_total",
        "kubeplex_watch_restarts_total",
        "kubeplex_cache_objects",
        "kubeplex_children_applied_total",
        "kubeplex_children_pruned_total",
        "kubeplex_parent_deletion_blocked",
        "kubeplex_cache_last_event_age_seconds",
    ] {
        let kept = r#"cluster="cluster-a""#;
        assert!(
            text.lines()
                .any(|l| l.starts_with(family) && l.contains(kept)),
            "{family} lost cluster-a too:\n{text}"
        );
    }
}

#[test]
fn member_changes_are_counted_with_those_at_work_and_waiting() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.member_changes().ended("join", "done");
    metrics.member_changes().ended("leave", "abandoned");
    metrics.member_changes().now(3, 7);
    let text = scrape(&registry);
    for line in [
        r#"kubeplex_member_changes_total{change="join",result="done"} 1"#,
        r#"kubeplex_member_changes_total{change="leave",result="abandoned"} 1"#,
        "kubeplex_member_changes_in_flight 3",
        "kubeplex_member_changes_waiting 7",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
