//! The README's demo command, in the mode that exits after the table.

use std::process::Command;

#[test]
fn the_demo_prints_the_scenario_come_true() {
    let output = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["demo", "--exit-after-table"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    for cluster in ["cluster-a", "cluster-b"] {
        for namespace in ["namespace-a", "namespace-b"] {
            for (name, image, replicas) in [("crd-a", "nginx:1.27", 2), ("crd-b", "redis:7.4", 1)] {
                let row = stdout.lines().find(|l| {
                    let cells: Vec<&str> = l.split_whitespace().collect();
                    cells.len() == 6 && cells[..3] == [cluster, namespace, name]
                });
                let cells: Vec<&str> = row
                    .unwrap_or_else(|| panic!("no row for {cluster}/{namespace}/{name}:\n{stdout}"))
                    .split_whitespace()
                    .collect();
                assert_eq!(
                    cells[3..],
                    [
                        replicas.to_string().as_str(),
                        image,
                        format!("control/crds/{name}").as_str()
                    ]
                );
            }
        }
    }
    for name in ["crd-a", "crd-b"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(name) && l.contains("True"))
            .unwrap_or_else(|| panic!("{name} not Ready:\n{stdout}"));
        assert_eq!(row.matches("Ready (2 children)").count(), 2, "{row}");
    }
    // It ends with where the metrics are, and the telling figures from them.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Metrics: http://127.0.0.1:") && l.ends_with("/metrics")),
        "{stdout}"
    );
    assert!(
        stdout.contains("contexts up (1) or down (0): cluster-a 1, cluster-b 1, control 1"),
        "{stdout}"
    );
    let reconciles = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("reconciles:"))
        .unwrap_or_else(|| panic!("no reconciles line:\n{stdout}"));
    assert!(
        reconciles.contains("children applied: cluster-a "),
        "{reconciles}"
    );
}
