//! `deploy/*/20-rbac.yaml` are what `fleet rbac` prints, derived from the controller's plan: a change of the
//! plan (or of the runtime's needs) that is not regenerated into the manifests fails here.

use std::path::Path;
use std::process::Command;

/// Each manifest and the `fleet rbac` arguments that generate it (those of `control/40-deployment.yaml`'s
/// `fleet run`, for the control cluster).
const GENERATED: [(&str, &[&str]); 2] = [
    (
        "deploy/control/20-rbac.yaml",
        &[
            "rbac",
            "--context",
            "control",
            "--leader-election",
            "--members-from-secrets",
            "kubeplex.io/fleet=kubeplex-fleet",
        ],
    ),
    (
        "deploy/child/20-rbac.yaml",
        &["rbac", "--context", "cluster-a"],
    ),
];

#[test]
fn the_rbac_manifests_are_what_fleet_rbac_prints() {
    for (file, args) in GENERATED {
        let output = Command::new(env!("CARGO_BIN_EXE_fleet"))
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .expect("fleet runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "fleet {args:?}: {stderr}");
        let printed = String::from_utf8(output.stdout).expect("UTF-8");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let checked_in = std::fs::read_to_string(&path).expect("the manifest is there");
        assert!(
            printed == checked_in,
            "examples/fleet/{file} differs from what `fleet {args}` prints; regenerate it with\n  \
             cargo run -p kubeplex-fleet -- {args} > examples/fleet/{file}",
            args = args.join(" ")
        );
    }
}

#[test]
fn the_generated_rbac_grants_the_deployments_where_the_plan_puts_them() {
    let yaml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(GENERATED[1].0))
        .expect("the child manifest");
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).expect("YAML");
    let roles: Vec<&serde_json::Value> = documents.iter().filter(|d| d["kind"] == "Role").collect();
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, kubeplex_fleet::CHILD_NAMESPACES);
    for role in roles {
        assert_eq!(
            role["rules"],
            serde_json::json!([{ "apiGroups": ["apps"], "resources": ["deployments"],
                "verbs": ["get", "list", "watch", "create", "patch", "delete"] }])
        );
    }
    // A cluster the operator does not use, without members, is refused.
    let refused = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["rbac", "--context", "nowhere"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--context nowhere: not a cluster of the operator"),
        "{stderr}"
    );
}
