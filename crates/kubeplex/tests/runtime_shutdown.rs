//! SIGTERM stops new reconciles, lets the one in flight finish, and the process exits 0; the operator finds
//! its context through `KUBECONFIG` as kubectl does.

mod support;

use std::convert::Infallible;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::{Action, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::{TestEnv, Watched};
use support::{Fleet, WAIT, create_namespace, put_config_map};

struct Slow;
impl Controller for Slow {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("slow")
            .contexts([Fleet::ClusterA])
            .namespaces(["slow"])
    }
}
impl Reconcile for Slow {
    type Error = Infallible;
    async fn reconcile(&self, object: Arc<ConfigMap>, _: &Cx<Fleet>) -> Result<Action, Infallible> {
        println!(
            "reconcile started: {}",
            object.metadata.name.as_deref().unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        println!("reconcile finished");
        Ok(Action::await_change())
    }
}

/// The operator process: started by the test below, with `KUBECONFIG` pointing at its environment.
#[tokio::test]
#[ignore = "runs only as the child process of sigterm_lets_the_reconcile_in_flight_finish_and_exits_0"]
async fn operator_process() {
    Manager::new().controller(Slow).run().await.unwrap();
    println!("manager returned");
}

#[tokio::test]
async fn sigterm_lets_the_reconcile_in_flight_finish_and_exits_0() {
    let env = TestEnv::builder()
        .cluster("cluster-a")
        .start()
        .await
        .unwrap();
    let client = env.client("cluster-a").await.unwrap();
    create_namespace(&client, "slow").await;
    put_config_map(&client, "slow", "slow-one", "1").await;

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
            .args(["operator_process", "--exact", "--ignored", "--nocapture"])
            .env("KUBECONFIG", kubeconfig),
    )
    .unwrap();
    operator.wait_for_line(|line| line.starts_with("reconcile started"), WAIT);
    // SAFETY: signals our own child.
    unsafe { libc::kill(operator.id() as libc::pid_t, libc::SIGTERM) };
    let (status, lines) = operator.wait(WAIT);
    assert_eq!(status.code(), Some(0), "{status}: {lines:#?}");
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
