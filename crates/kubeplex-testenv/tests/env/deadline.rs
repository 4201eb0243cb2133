//! A test that hangs past its deadline fails its test binary, naming itself, instead of holding the run.

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::{TEST_DEADLINE_VAR, eventually, output_within};

/// Waits an hour for what never comes: started by the test below with a deadline of 2 s.
#[tokio::test]
#[ignore = "runs only as the child process of the test below"]
async fn waits_for_what_never_comes() {
    eventually("what never comes", Duration::from_secs(3600), async || {
        None::<()>
    })
    .await;
}

#[test]
fn a_test_past_its_deadline_fails_its_binary_naming_itself() {
    let output = output_within(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "deadline::waits_for_what_never_comes",
                "--exact",
                "--ignored",
            ])
            .env(TEST_DEADLINE_VAR, "2"),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(101), "{stderr}");
    assert!(
        stderr.contains(
            "test deadline::waits_for_what_never_comes is still running 2s after it first used"
        ),
        "{stderr}"
    );
}
