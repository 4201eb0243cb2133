//! `fleet run --namespace .. --child-namespaces ..`: namespaces chosen at run time, checked when the
//! operator starts (before it connects to any cluster) in the words of `#[controller]`'s own checks.

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::output_within;

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");

/// The rule a namespace breaks, as `#[controller]` words it.
const RULE: &str =
    "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit";

/// Runs `fleet run` with `args` and `env`, with no kubeconfig to reach; its exit code and stderr.
fn fleet_run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    // It exits before connecting anywhere; the limit only keeps a hang from holding CI.
    let output = output_within(
        Command::new(FLEET)
            .arg("run")
            .args(["--probe-address", "127.0.0.1:0"])
            .args(args)
            .env_remove("FLEET_NAMESPACE")
            .env_remove("FLEET_CHILD_NAMESPACES")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .envs(env.iter().copied()),
        Duration::from_secs(60),
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn run_names_its_namespace_flags_and_their_defaults() {
    let output = output_within(
        Command::new(FLEET).args(["run", "--help"]),
        Duration::from_secs(60),
    );
    let help = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "--namespace <NAMESPACE>",
        "[env: FLEET_NAMESPACE=]",
        "[default: crds]",
        "--child-namespaces <NAMESPACES>",
        "[env: FLEET_CHILD_NAMESPACES=]",
        "[default: namespace-a,namespace-b]",
    ] {
        assert!(help.contains(expected), "expected {expected:?} in {help}");
    }
}

#[test]
fn an_invalid_child_namespace_fails_at_start_naming_it_and_the_rule() {
    let (code, stderr) = fleet_run(&["--child-namespaces", "Bad_NS"], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "fleet: controller app-deployer: owns(Deployment.apps/v1): invalid namespace \"Bad_NS\": \
             it contains 'B' (lowercase it); {RULE}"
        )
    );
}

#[test]
fn the_environment_sets_them_too_and_every_problem_is_told_at_once() {
    let (code, stderr) = fleet_run(
        &[],
        &[
            ("FLEET_NAMESPACE", "-crds"),
            ("FLEET_CHILD_NAMESPACES", "team-a,team-a"),
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "invalid namespace \"-crds\": it starts or ends with '-'; {RULE}"
        )),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("owns(Deployment.apps/v1): namespace \"team-a\" is listed twice; remove one"),
        "{stderr}"
    );
}
