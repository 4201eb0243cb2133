//! The README's demo command, in the mode that exits after the last table: the scenario come true, then
//! cluster-c joining the fleet by its Secret (its Deployments appear) and leaving it (they are gone).

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::output_within;

const INSTANCES: [(&str, &str, i32); 2] = [("crd-a", "nginx:1.27", 2), ("crd-b", "redis:7.4", 1)];
const NAMESPACES: [&str; 2] = ["namespace-a", "namespace-b"];

/// The Deployment rows of `cluster` in a table: (namespace, name, replicas, available, image, parent).
fn deployment_rows<'a>(section: &'a str, cluster: &str) -> Vec<Vec<&'a str>> {
    section
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.len() == 7 && cells[0] == cluster)
        .map(|cells| cells[1..].to_vec())
        .collect()
}

/// The (available replicas, image) of `name`'s Deployments in `cluster`, in a table.
fn running<'a>(section: &'a str, cluster: &str, name: &str) -> Vec<(&'a str, &'a str)> {
    deployment_rows(section, cluster)
        .into_iter()
        .filter(|cells| cells[1] == name)
        .map(|cells| (cells[3], cells[4]))
        .collect()
}

/// Every instance has a Deployment in each namespace of `cluster`, and nothing else is there.
fn assert_deployed(section: &str, cluster: &str) {
    let mut expected = Vec::new();
    for namespace in NAMESPACES {
        for (name, image, replicas) in INSTANCES {
            let parent = format!("control/crds/{name}");
            expected
                .push([namespace, name, &replicas.to_string(), image, &parent].map(str::to_owned));
        }
    }
    // Nothing runs pods: none is available.
    let rows: Vec<[String; 5]> = deployment_rows(section, cluster)
        .into_iter()
        .inspect(|cells| assert_eq!(cells[3], "0", "{cluster}: {cells:?}"))
        .map(|cells| [0, 1, 2, 4, 5].map(|i| cells[i].to_owned()))
        .collect();
    assert_eq!(rows, expected, "{cluster}'s Deployments in:\n{section}");
}

/// The status row of each instance: APPLIED, READY, ROLLOUT, then one cell per cluster column.
fn status_row<'a>(section: &'a str, name: &str) -> &'a str {
    section
        .lines()
        .find(|l| l.starts_with(&format!("{name:<8} ")))
        .unwrap_or_else(|| panic!("no status row for {name}:\n{section}"))
}

#[test]
fn the_demo_prints_the_scenario_come_true_and_a_cluster_joining_and_leaving() {
    // Several clusters start, the scenario runs and a member joins and leaves: minutes, not ten.
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_fleet")).args(["demo", "--exit-after-table"]),
        Duration::from_secs(10 * 60),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // The control cluster's API server calls the operator's webhooks.
    assert!(
        stdout.contains(
            "rollout order names cluster-x is refused: admission webhook \"validate.demo.kubeplex.dev\" \
             denied the request: spec.rollout.order names clusters the fleet does not have: cluster-x"
        ),
        "{stdout}"
    );
    // crd-b is written in v2; each object reads in the other version, converted by the operator.
    assert!(
        stdout.contains(
            "crd-a in v2 has spec.workload.image nginx:1.27; crd-b in v1 has spec.image redis:7.4."
        ),
        "{stdout}"
    );
    // Before cluster-c's Secret is created, after it, and after it is deleted.
    let (before, rest) = stdout
        .split_once("\nCreated Secret kubeplex-system/cluster-c in control")
        .unwrap_or_else(|| panic!("cluster-c's Secret never created:\n{stdout}"));
    let (joined, rest) = rest
        .split_once("\nDeleted Secret kubeplex-system/cluster-c:")
        .unwrap_or_else(|| panic!("cluster-c's Secret never deleted:\n{stdout}"));
    // Then the progressive rollout, halted, and completed.
    let (left, rollout) = rest
        .split_once("\nProgressive rollout:")
        .unwrap_or_else(|| panic!("no rollout:\n{stdout}"));
    let (halted, completed) = rollout
        .split_once("\ncluster-a recovers")
        .unwrap_or_else(|| panic!("cluster-a never recovers:\n{rollout}"));

    // The original scenario: cluster-a and cluster-b, nothing in cluster-c.
    for cluster in ["cluster-a", "cluster-b"] {
        assert_deployed(before, cluster);
    }
    assert!(deployment_rows(before, "cluster-c").is_empty(), "{before}");
    for (name, _, _) in INSTANCES {
        // Applied, not Ready (nothing runs pods), no rollout.
        let row = status_row(before, name);
        assert!(
            row.contains(" True    False   -  "),
            "{name} not Applied: {row}"
        );
        assert_eq!(row.matches("Applied, ").count(), 2, "{row}");
    }
    // It says where the metrics are, and the telling figures from them.
    assert!(
        before
            .lines()
            .any(|l| l.starts_with("Metrics: http://127.0.0.1:") && l.ends_with("/metrics")),
        "{before}"
    );
    assert!(
        before.contains("contexts up (1) or down (0): cluster-a 1, cluster-b 1, control 1"),
        "{before}"
    );
    let reconciles = before
        .lines()
        .find(|l| l.trim_start().starts_with("reconciles:"))
        .unwrap_or_else(|| panic!("no reconciles line:\n{before}"));
    assert!(
        reconciles.contains("children applied: cluster-a "),
        "{reconciles}"
    );

    // cluster-c joined: its Deployments (listed from cluster-c itself) and its column in the status.
    assert!(joined.contains("cluster-c has its Deployments"), "{joined}");
    for cluster in ["cluster-a", "cluster-b", "cluster-c"] {
        assert_deployed(joined, cluster);
    }
    assert!(
        joined.contains("CLUSTER-A                CLUSTER-B                CLUSTER-C"),
        "{joined}"
    );
    for (name, _, _) in INSTANCES {
        let row = status_row(joined, name);
        assert_eq!(row.matches("Applied, ").count(), 3, "{row}");
    }

    // cluster-c left: its Deployments are gone from cluster-c, its status too; the others are untouched.
    assert!(
        left.contains("cluster-c left: its Secret is gone"),
        "{left}"
    );
    assert!(deployment_rows(left, "cluster-c").is_empty(), "{left}");
    for cluster in ["cluster-a", "cluster-b"] {
        assert_deployed(left, cluster);
    }
    for (name, _, _) in INSTANCES {
        let row = status_row(left, name);
        assert_eq!(row.matches("Applied, ").count(), 2, "{row}");
        assert!(row.ends_with(" -"), "cluster-c still in the status: {row}");
    }
    // The rollout: cluster-a has the new image and is Degraded, cluster-b keeps the old one, the status
    // says where and why; then both run the new one, Healthy.
    let both = |available, image| vec![(available, image); 2];
    assert_eq!(
        running(halted, "cluster-a", "crd-a"),
        both("0", "nginx:1.28"),
        "{halted}"
    );
    assert_eq!(
        running(halted, "cluster-b", "crd-a"),
        both("2", "nginx:1.27"),
        "{halted}"
    );
    let row = status_row(halted, "crd-a");
    assert!(row.contains(" True    False   Halted "), "{row}");
    // The cluster's cell names the worst child and why, beside the count.
    let cell =
        "Applied, 2 Degraded: namespace-a/crd-a progress deadline exceeded Applied, 2 Healthy";
    assert!(row.ends_with(cell), "{row}");
    assert!(
        halted.contains(
            "crd-a rollout of nginx:1.28: halted at cluster-a: namespace-a/crd-a Degraded: progress \
             deadline exceeded"
        ),
        "{halted}"
    );
    for cluster in ["cluster-a", "cluster-b"] {
        let crd_a = running(completed, cluster, "crd-a");
        assert_eq!(crd_a, both("2", "nginx:1.28"), "{completed}");
    }
    let row = status_row(completed, "crd-a");
    assert!(row.contains(" True    True    Complete "), "{row}");
    assert!(
        completed.contains("crd-a rollout of nginx:1.28: nginx:1.28 given to every cluster"),
        "{completed}"
    );
}
