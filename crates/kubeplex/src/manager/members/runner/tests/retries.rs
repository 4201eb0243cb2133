//! Joins the runner tries again by itself: a credential plugin that fails is run again with backoff until
//! it succeeds, a newer change of the member or its leave cancels the pending retry, and a join that cannot
//! succeed as configured waits for a change.

use std::path::Path;
use std::time::Duration;

use kube::config::{ExecConfig, ExecInteractiveMode};

use super::{Runner, settle, start};
use crate::members::{Command, LeaveOutcome};
use crate::readiness::ClusterReadiness;

/// A configuration whose exec plugin exits 3 while `flag` exists, else prints a token.
fn plugin_config(flag: &Path) -> kube::Config {
    let script = format!(
        r#"if [ -e '{}' ]; then exit 3; fi; printf '%s' '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"t"}}}}'"#,
        flag.display()
    );
    command_config("sh", vec!["-c".into(), script])
}

fn command_config(command: &str, args: Vec<String>) -> kube::Config {
    let mut config = kube::Config::new("https://member.example:6443".parse().unwrap());
    config.auth_info.exec = Some(ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some(command.into()),
        args: Some(args),
        interactive_mode: Some(ExecInteractiveMode::Never),
        ..ExecConfig::default()
    });
    config
}

impl Runner {
    async fn join_with(&self, name: &str, config: kube::Config) {
        let (name, config) = (name.to_owned(), Box::new(config));
        let join = Command::Join { name, config };
        self.commands.send(join).await.unwrap();
        settle().await;
    }

    /// `/readyz`'s reasons for `name`, which must be failing.
    fn failing(&self, name: &str) -> String {
        let report = self.runtime.readiness.report();
        let context = &report.clusters[name];
        assert_ne!(context.status, ClusterReadiness::Ready, "{name} is ready");
        context.reasons.join("; ")
    }

    /// Waits ten minutes, asserting that the controllers are told of nothing meanwhile.
    async fn nothing_for_ten_minutes(&mut self) {
        let told = tokio::time::timeout(Duration::from_secs(600), self.changes.recv()).await;
        assert!(told.is_err(), "the controllers were told of a change");
    }
}

#[tokio::test(start_paused = true)]
async fn a_join_whose_plugin_fails_is_tried_again_until_the_plugin_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("token-server-down");
    std::fs::write(&flag, "").unwrap();
    let mut runner = start();
    runner.join_with("member-a", plugin_config(&flag)).await;
    assert_eq!(runner.counted("join", "failed"), 1);
    let reasons = runner.failing("member-a");
    assert!(
        reasons.contains("the credential plugin") && reasons.contains("exit status: 3"),
        "{reasons}"
    );
    assert!(runner.changes.try_recv().is_err(), "told of a join");

    // Tried again by the runner, no change reported: within 8 s at least twice (1–2 s, then 2–4 s later).
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(runner.counted("join", "failed") >= 3);
    assert!(runner.failing("member-a").contains("exit status: 3"));

    // The token server is back: the next retry joins it.
    std::fs::remove_file(&flag).unwrap();
    let (name, done) = runner.joined().await;
    assert_eq!(name, "member-a");
    done.send(()).unwrap();
    settle().await;
    assert_eq!(runner.counted("join", "done"), 1);
    assert!(runner.runtime.members.is_current("member-a"));
    let failed = runner.counted("join", "failed");
    // Joined: nothing is tried again.
    runner.nothing_for_ten_minutes().await;
    assert_eq!(runner.counted("join", "failed"), failed);
    assert_eq!(runner.counted("credentials", "done"), 0);
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_newer_change_of_the_member_or_its_leave_cancels_the_pending_retry() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("token-server-down");
    std::fs::write(&flag, "").unwrap();
    let mut runner = start();

    // New credentials from the provider: they join, and the failed ones are never tried again.
    runner.join_with("member-a", plugin_config(&flag)).await;
    assert_eq!(runner.counted("join", "failed"), 1);
    runner.join("member-a", "https://a.example:6443").await;
    let (name, done) = runner.joined().await;
    assert_eq!(name, "member-a");
    done.send(()).unwrap();
    runner.nothing_for_ten_minutes().await;
    assert_eq!(runner.counted("join", "failed"), 1);
    assert_eq!(runner.counted("credentials", "failed"), 0);

    // A leave: the member is gone, and its join is not tried again.
    runner.join_with("member-b", plugin_config(&flag)).await;
    assert_eq!(runner.counted("join", "failed"), 2);
    let answer = runner.leave("member-b").await;
    let outcome = tokio::time::timeout(Duration::from_secs(60), answer).await;
    assert_eq!(
        outcome.expect("the leave is answered"),
        Ok(LeaveOutcome::Done)
    );
    std::fs::remove_file(&flag).unwrap();
    runner.nothing_for_ten_minutes().await;
    assert_eq!(runner.counted("join", "failed"), 2);
    assert!(
        !runner
            .runtime
            .readiness
            .report()
            .clusters
            .contains_key("member-b")
    );
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_join_that_cannot_succeed_as_configured_is_not_tried_again() {
    let mut runner = start();
    // No such plugin, and a name a fixed context has: neither passes without a change.
    let missing = command_config("/nonexistent/kubeplex-test-plugin", Vec::new());
    runner.join_with("member-a", missing).await;
    runner.join("control", "https://control.example:6443").await;
    settle().await;
    assert_eq!(runner.counted("join", "failed"), 2);
    assert!(
        runner
            .failing("member-a")
            .contains("the credential plugin (users[].user.exec.command) could not be started")
    );
    runner.nothing_for_ten_minutes().await;
    assert_eq!(runner.counted("join", "failed"), 2);
    runner.stop().await;
}
