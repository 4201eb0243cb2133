//! Shutdown of an operator process: SIGTERM (and SIGINT alike) stops new reconciles while many objects are
//! still queued, lets the one in flight finish, and the process exits 0; a second signal stops at once.
//! The operator finds its context through `KUBECONFIG` as kubectl does.

use std::convert::Infallible;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{Fleet, WAIT, create_namespace, put_config_map};
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::{Action, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::{TestEnv, Watched};

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

/// One reconcile at a time, each taking `SLOW_SECONDS`, of the ConfigMaps in `SLOW_NAMESPACE`.
struct Slow;
impl Controller for Slow {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        let namespace = std::env::var("SLOW_NAMESPACE").unwrap_or_else(|_| "slow".into());
        Plan::new("slow")
            .with_contexts([Fleet::ClusterA])
            .with_namespaces([namespace])
            .with_concurrency(1)
    }
}
impl Reconcile for Slow {
    type Error = Infallible;
    async fn reconcile(&self, object: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Infallible> {
        let seconds = std::env::var("SLOW_SECONDS").map_or(3, |s| s.parse().unwrap());
        println!(
            "reconcile started: {}",
            object.metadata.name.as_deref().unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        println!("reconcile finished");
        Ok(Action::await_change())
    }
}

/// The operator process's test, by the name the test binary knows it by.
const OPERATOR_PROCESS: &str = "shutdown::operator_process";

/// The operator process: started by the tests below, with `KUBECONFIG` pointing at their environment. It
/// logs to stdout, so that a test sees when the first signal was taken.
#[tokio::test]
#[ignore = "runs only as the child process of the tests in this file"]
async fn operator_process() {
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stdout)
        .init();
    Manager::new().controller(Slow).run().await.unwrap();
    println!("manager returned");
}

/// A namespace of its own with `objects` ConfigMaps, and the operator process reconciling them, each
/// reconcile taking `seconds`; returns once the first reconcile has started.
async fn operator(namespace: &str, objects: usize, seconds: u64) -> Watched {
    let env = env().await;
    let client = env.client("cluster-a").await.unwrap();
    create_namespace(&client, namespace).await;
    for i in 0..objects {
        put_config_map(&client, namespace, &format!("object-{i}"), "1").await;
    }

    // KUBECONFIG as kubectl reads it: a list of files, merged; the context is in the second one.
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    std::fs::write(
        &first,
        r#"{"apiVersion": "v1", "kind": "Config", "contexts": [], "clusters": [], "users": []}"#,
    )
    .unwrap();
    let kubeconfig = std::env::join_paths([first.as_path(), env.kubeconfig_path()]).unwrap();

    let mut operator = Watched::spawn(
        "the operator process",
        Command::new(std::env::current_exe().unwrap())
            .args([OPERATOR_PROCESS, "--exact", "--ignored", "--nocapture"])
            .env("KUBECONFIG", kubeconfig)
            .env("SLOW_NAMESPACE", namespace)
            .env("SLOW_SECONDS", seconds.to_string()),
    )
    .unwrap();
    operator.wait_for_line(|line| line.starts_with("reconcile started"), WAIT);
    operator
}

fn signal(operator: &Watched, signal: libc::c_int) {
    // SAFETY: signals our own child.
    let sent = unsafe { libc::kill(operator.id() as libc::pid_t, signal) };
    assert_eq!(sent, 0, "signalling the operator");
}

fn count(lines: &[String], matches: impl Fn(&str) -> bool) -> usize {
    lines.iter().filter(|l| matches(l)).count()
}

/// Many objects queued, one slow reconcile in flight (concurrency 1), then `stop`: the reconcile in flight
/// finishes, no other starts, and the process exits 0 after the manager returned.
async fn stops_gracefully_on(stop: libc::c_int, namespace: &str) {
    let operator = operator(namespace, 8, 3).await;
    signal(&operator, stop);
    let (status, lines) = operator.wait(WAIT);
    assert_eq!(status.code(), Some(0), "{status}: {lines:#?}");
    assert_eq!(
        count(&lines, |l| l.starts_with("reconcile started")),
        1,
        "a reconcile started after the signal (7 were queued): {lines:#?}"
    );
    let rest = &lines[lines
        .iter()
        .position(|l| l.starts_with("reconcile started"))
        .unwrap()..];
    let finished = rest
        .iter()
        .position(|l| l == "reconcile finished")
        .expect("the reconcile in flight was cut short");
    let returned = rest
        .iter()
        .position(|l| l == "manager returned")
        .expect("the manager did not return");
    assert!(finished < returned, "{rest:#?}");
}

#[tokio::test]
async fn sigterm_starts_no_new_reconcile_lets_the_one_in_flight_finish_and_exits_0() {
    stops_gracefully_on(libc::SIGTERM, "slow-sigterm").await;
}

#[tokio::test]
async fn sigint_behaves_like_sigterm() {
    stops_gracefully_on(libc::SIGINT, "slow-sigint").await;
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    // The reconcile in flight would take two minutes.
    let mut operator = operator("slow-twice", 1, 120).await;
    signal(&operator, libc::SIGTERM);
    operator.wait_for_line(|line| line.contains("shutting down"), WAIT);
    let second = Instant::now();
    signal(&operator, libc::SIGINT);
    let (status, lines) = operator.wait(Duration::from_secs(10));
    let stopped_after = second.elapsed();
    assert_eq!(status.code(), Some(0), "{status}: {lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("second signal")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l == "manager returned"),
        "run() returns Ok at the second signal: {lines:#?}"
    );
    assert_eq!(
        count(&lines, |l| l == "reconcile finished"),
        0,
        "the process waited for the reconcile in flight ({stopped_after:?}): {lines:#?}"
    );
}
