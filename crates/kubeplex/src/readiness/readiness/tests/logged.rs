//! What a cluster's failures log: one line per cluster and cause, again once a minute, and one when it ends.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;
use parking_lot::Mutex;

use super::{api_error, connection_refused};
use crate::readiness::Readiness;

/// What is logged at WARN and above, as lines.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// Captures what this thread logs at WARN and above until the guard is dropped.
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        Self::capture_at(tracing::Level::WARN)
    }

    /// Captures what this thread logs at INFO and above until the guard is dropped.
    fn capture_info() -> (Self, tracing::subscriber::DefaultGuard) {
        Self::capture_at(tracing::Level::INFO)
    }

    fn capture_at(level: tracing::Level) -> (Self, tracing::subscriber::DefaultGuard) {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (lines, tracing::subscriber::set_default(subscriber))
    }

    fn lines(&self) -> Vec<String> {
        let text = String::from_utf8(self.0.lock().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }
}

/// Captures what is logged at WARN and above while `f` runs.
fn warnings(f: impl FnOnce()) -> Vec<String> {
    let (lines, guard) = Lines::capture();
    f();
    drop(guard);
    lines.lines()
}

#[test]
fn a_failure_that_persists_is_logged_once_with_its_context_and_an_expiry_not_at_all() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    let watch = readiness.watch_started(
        "cluster-b",
        Some("ns"),
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    let lines = warnings(|| {
        for _ in 0..100 {
            watch.failed(&api_error(403));
        }
        watch.failed(&api_error(401));
        let gone =
            kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        watch.failed(&watcher::Error::WatchError(gone.boxed()));
    });
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines.iter().all(|l| l.contains("cluster=cluster-b")),
        "{lines:#?}"
    );
    assert!(lines[0].contains("403 Forbidden") && lines[1].contains("401 Unauthorized"));
    assert!(
        !readiness.report().clusters["cluster-b"]
            .reasons
            .iter()
            .any(|r| r.contains("410"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_persists_is_logged_again_once_a_minute_with_the_times_seen_since() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    let watch = readiness.watch_started(
        "cluster-b",
        Some("ns"),
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    let (lines, _guard) = Lines::capture();
    watch.failed(&api_error(403));
    // The watch retries and the pings go on: each looks at the cluster again.
    for _ in 0..5 {
        tokio::time::advance(Duration::from_secs(10)).await;
        watch.failed(&api_error(403));
        readiness.pinged("cluster-b", None);
    }
    assert_eq!(lines.lines().len(), 1, "{:#?}", lines.lines());
    // A minute after the first line: logged again, with the times seen since.
    tokio::time::advance(Duration::from_secs(10)).await;
    readiness.pinged("cluster-b", None);
    let logged = lines.lines();
    assert_eq!(logged.len(), 2, "{logged:#?}");
    assert!(
        logged[1].contains("cluster still failing") && logged[1].contains("repeats=6"),
        "{logged:#?}"
    );
}

#[test]
fn an_outage_of_many_watches_is_one_line_naming_how_many_it_holds_up_and_one_when_it_ends() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    readiness.connected("cluster-b", None);
    let watches: Vec<_> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|namespace| {
            readiness.watch_started(
                "cluster-b",
                Some(namespace),
                "Deployment.apps/v1".into(),
                "deployments".into(),
            )
        })
        .collect();
    let (lines, guard) = Lines::capture();
    readiness.pinged("cluster-b", Some("unreachable: connection refused".into()));
    for watch in &watches {
        watch.failed(&connection_refused());
    }
    readiness.pinged("cluster-b", Some("unreachable: connection refused".into()));
    let logged = lines.lines();
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert!(
        logged[0].contains("cluster=cluster-b")
            && logged[0].contains("unreachable: connection refused")
            && logged[0].contains("watches=4"),
        "{logged:#?}"
    );
    drop(guard);
    let (lines, _guard) = Lines::capture_info();
    readiness.pinged("cluster-b", None);
    for watch in &watches {
        watch.synced();
    }
    let logged = lines.lines();
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert!(logged[0].contains("cluster answers again"), "{logged:#?}");
}

#[test]
fn a_clusters_line_names_the_cause_of_each_failing_watch() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-b", true);
    readiness.connected("cluster-b", None);
    let watch = |kind: &str, plural: &str, namespace| {
        readiness.watch_started("cluster-b", Some(namespace), kind.into(), plural.into())
    };
    let watches = [
        watch("Deployment.apps/v1", "deployments", "team-a"),
        watch("Deployment.apps/v1", "deployments", "team-b"),
        watch("ConfigMap.v1", "configmaps", "team-a"),
    ];
    let lines = warnings(|| {
        for watch in &watches {
            watch.failed(&api_error(403));
        }
    });
    // A line each time the causes change; the last names all three, and the watches they hold up.
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let last = &lines[2];
    for cause in [
        "deployments in namespace team-a",
        "deployments in namespace team-b",
        "configmaps in namespace team-a",
    ] {
        assert!(last.contains(cause), "{last}");
    }
    assert!(
        last.contains("cluster=cluster-b") && last.contains("watches=3"),
        "{last}"
    );
}
