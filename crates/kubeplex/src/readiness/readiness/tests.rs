//! Readiness: readiness per cluster, and how failures are phrased (`logged.rs`: how they are logged).

use kube::runtime::watcher;

use super::*;

mod logged;

fn api_error(code: u16) -> watcher::Error {
    let status = kube::core::Status::failure("denied", "Reason").with_code(code);
    watcher::Error::InitialListFailed(kube::Error::Api(status.boxed()))
}

/// A watch's reconnect refused: its server is gone.
fn connection_refused() -> watcher::Error {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    watcher::Error::WatchStartFailed(kube::Error::Service(Box::new(io)))
}

#[test]
fn a_context_is_ready_once_configured_answering_and_every_watch_synced() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-a", true);
    readiness.declare("cluster-b", false);
    let report = readiness.report();
    assert_eq!(
        report.clusters["cluster-a"].status,
        ClusterReadiness::Starting
    );
    assert!(!report.ready && !report.started);

    readiness.connected("cluster-a", None);
    let watch = readiness.watch_started(
        "cluster-a",
        Some("ns"),
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    assert_eq!(
        readiness.report().clusters["cluster-a"].status,
        ClusterReadiness::Starting
    );
    watch.synced();
    let report = readiness.report();
    assert_eq!(report.clusters["cluster-a"].status, ClusterReadiness::Ready);
    assert!(
        report.ready && report.started,
        "the optional cluster-b does not hold it back"
    );

    // Started stays latched; ready follows.
    readiness.pinged("cluster-a", Some("unreachable: connection refused".into()));
    let report = readiness.report();
    assert!(report.started && !report.ready);
    assert_eq!(
        report.clusters["cluster-a"].reasons,
        ["cluster cluster-a: unreachable: connection refused"]
    );
}

#[test]
fn watch_failures_are_phrased_with_verb_resource_and_namespace() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-a", true);
    let watch = readiness.watch_started(
        "cluster-a",
        Some("ns"),
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    for (code, expected) in [
        (401, "credentials were rejected (401 Unauthorized)"),
        (
            403,
            "user may not list deployments in namespace ns (403 Forbidden)",
        ),
        (404, "kind Deployment.apps/v1 is not served"),
        (500, "list deployments in namespace ns failed: denied (500)"),
    ] {
        watch.failed(&api_error(code));
        let report = readiness.report();
        assert_eq!(
            report.clusters["cluster-a"].reasons,
            [format!("cluster cluster-a: {expected}")]
        );
        assert_eq!(
            report.clusters["cluster-a"].status,
            ClusterReadiness::Failing
        );
    }
    watch.working();
    assert!(readiness.report().clusters["cluster-a"].reasons.is_empty());
}

#[test]
fn a_required_context_without_a_client_is_fatal_and_an_optional_one_is_not() {
    let readiness = Readiness::default();
    readiness.declare("control", true);
    readiness.declare("extra", false);
    let error = Error::UndeclaredContext {
        context: "x".into(),
    };
    readiness.connected("control", Some(&error));
    readiness.connected("extra", Some(&error));
    assert_eq!(readiness.fatal_errors().len(), 1);
}

#[test]
fn a_server_that_answers_pings_again_clears_its_watches_unreachable_not_their_refusals() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    readiness.connected("cluster-b", None);
    let watch = |namespace| {
        let watch = readiness.watch_started(
            "cluster-b",
            Some(namespace),
            "Deployment.apps/v1".into(),
            "deployments".into(),
        );
        watch.synced();
        watch
    };
    let (quiet, refused) = (watch("quiet"), watch("refused"));
    // The cluster goes away: both watches fail to reconnect; then one of them is also refused (403).
    readiness.pinged("cluster-b", Some("unreachable: connection refused".into()));
    quiet.failed(&connection_refused());
    refused.failed(&api_error(403));
    assert_eq!(
        readiness.report().clusters["cluster-b"].status,
        ClusterReadiness::Failing
    );

    // It answers again. The quiet watch resumed without an event to say so: the answer clears it; the
    // refusal is a server's answer and stays until the watch itself works.
    readiness.pinged("cluster-b", None);
    let report = readiness.report();
    let problems: Vec<_> = report.clusters["cluster-b"]
        .watches
        .iter()
        .map(|w| (w.namespace.as_str(), w.problem.is_some()))
        .collect();
    assert_eq!(problems, [("quiet", false), ("refused", true)]);
    refused.working();
    assert_eq!(
        readiness.report().clusters["cluster-b"].status,
        ClusterReadiness::Ready
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_waiting_to_retry_retries_as_soon_as_its_server_answers_a_ping_again() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    readiness.connected("cluster-b", None);
    let watch = readiness.watch_started(
        "cluster-b",
        Some("apps"),
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    watch.synced();
    watch.failed(&connection_refused());
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move {
        watch.retry_after(std::time::Duration::from_secs(16)).await;
        started.elapsed()
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    readiness.pinged("cluster-b", None);
    let waited = waiting.await.unwrap();
    assert!(
        waited < std::time::Duration::from_secs(2),
        "retried {waited:?} after the failure, not when the server answered"
    );
}

#[test]
fn started_latches_without_a_report_when_every_required_context_is_ready_at_once() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-a", true);
    readiness.declare("cluster-b", true);
    readiness.declare("optional", false);
    readiness.connected("cluster-a", None);
    readiness.connected("cluster-b", None);
    let a = readiness.watch_started(
        "cluster-a",
        None,
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    let b = readiness.watch_started(
        "cluster-b",
        None,
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    readiness.arm();
    a.synced();
    assert!(!readiness.is_started(), "cluster-b has not listed");
    // cluster-a fails while cluster-b lists: never both ready, so not started.
    a.failed(&api_error(403));
    b.synced();
    assert!(!readiness.is_started(), "cluster-a is failing");
    a.synced();
    assert!(
        readiness.is_started(),
        "both ready at once, the optional context aside"
    );
    assert!(readiness.report().started, "the report agrees");
    // Latched: a later failure changes readiness, not `started`.
    b.failed(&api_error(500));
    assert!(readiness.is_started());
    assert!(!readiness.report().ready);
    assert!(!readiness.has_fatal_errors());
}

#[test]
fn a_required_context_without_a_client_is_fatal_an_optional_one_is_not() {
    let readiness = Readiness::default();
    readiness.declare("required", true);
    readiness.declare("optional", false);
    let error = Error::ClientConfig {
        context: "optional".into(),
        reason: "no such user".into(),
    };
    readiness.connected("optional", Some(&error));
    assert!(!readiness.has_fatal_errors());
    let error = Error::ClientConfig {
        context: "required".into(),
        reason: "no such user".into(),
    };
    readiness.connected("required", Some(&error));
    assert!(readiness.has_fatal_errors());
    assert_eq!(readiness.fatal_errors().len(), 1);
}

#[test]
fn a_member_forgotten_stays_gone_whatever_its_ping_or_watches_report_late() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("member-1", false);
    readiness.connected("member-1", None);
    let watch = readiness.watch_started(
        "member-1",
        Some("apps"),
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    watch.synced();
    assert!(readiness.report().clusters.contains_key("member-1"));

    // It left. Its ping, on its own thread, and a watch task aborted mid-poll may still report once.
    readiness.forget_context("member-1");
    readiness.pinged("member-1", None);
    readiness.pinged("member-1", Some("unreachable: connection refused".into()));
    watch.failed(&api_error(403));
    watch.working();
    readiness.forget_watch(&watch.entry());
    assert!(
        !readiness.report().clusters.contains_key("member-1"),
        "{:#?}",
        readiness.report().clusters
    );

    // It joins again: it is reported anew.
    readiness.declare("member-1", false);
    readiness.connected("member-1", None);
    assert_eq!(
        readiness.report().clusters["member-1"].status,
        ClusterReadiness::Ready
    );
}

#[test]
fn a_cluster_that_stops_answering_and_answers_again_flips_twice_and_its_first_readiness_is_no_flip()
{
    let readiness = Arc::new(Readiness::default());
    let mut flips = readiness.flips();
    readiness.declare("cluster-a", true);
    readiness.connected("cluster-a", None);
    let watch = readiness.watch_started(
        "cluster-a",
        None,
        "ConfigMap/v1".into(),
        "configmaps".into(),
    );
    watch.synced();
    assert!(readiness.is_context_ready("cluster-a"));
    assert!(
        flips.try_recv().is_err(),
        "becoming ready the first time is no flip"
    );

    readiness.pinged("cluster-a", Some("unreachable: no answer within 5s".into()));
    assert_eq!(flips.try_recv().unwrap(), "cluster-a");
    // Still failing, for another cause: no flip.
    readiness.pinged("cluster-a", Some("unreachable: connection refused".into()));
    assert!(flips.try_recv().is_err());
    readiness.pinged("cluster-a", None);
    assert_eq!(flips.try_recv().unwrap(), "cluster-a");
    assert!(flips.try_recv().is_err());
}

#[test]
fn a_declared_cluster_is_known_ready_or_not_and_a_forgotten_or_undeclared_one_is_not() {
    let readiness = Readiness::default();
    readiness.declare("cluster-a", true);
    assert!(readiness.knows("cluster-a"), "known while still connecting");
    assert!(!readiness.knows("cluster-b"));

    readiness.forget_context("cluster-a");
    assert!(!readiness.knows("cluster-a"));
}
