//! `deploy/*/20-rbac.yaml` (the charts' RBAC rendered, `tests/chart`) grant what `fleet rbac` prints, derived
//! from the controller's plan: a change of the plan (or of the runtime's needs) that the charts do not follow
//! fails here (and, for every mode of the chart, in `tests/chart`).

use kubeplex_testenv::output_within;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
fn the_rbac_manifests_grant_what_fleet_rbac_prints() {
    for (file, args) in GENERATED {
        let output = output_within(
            Command::new(env!("CARGO_BIN_EXE_fleet"))
                .args(args)
                .env_remove("RUST_LOG"),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "fleet {args:?}: {stderr}");
        let printed: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&String::from_utf8(output.stdout).expect("UTF-8"))
                .expect("YAML");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).expect("the manifest is there");
        let checked_in: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("YAML");
        assert_eq!(
            grants(&checked_in),
            grants(&printed),
            "examples/fleet/{file} grants other rights than `fleet {args}` prints: change the chart's \
             RBAC, then render deploy/ again (tests/chart)",
            args = args.join(" ")
        );
    }
}

/// (namespace, apiGroup, resource, verb) of every Role.
fn grants(documents: &[serde_json::Value]) -> BTreeSet<[String; 4]> {
    let mut out = BTreeSet::new();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    for role in documents.iter().filter(|d| d["kind"] == "Role") {
        let namespace = role["metadata"]["namespace"].as_str().unwrap().to_owned();
        for rule in role["rules"].as_array().unwrap() {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.insert([namespace.clone(), group.clone(), resource.clone(), verb]);
                    }
                }
            }
        }
    }
    assert!(!out.is_empty());
    out
}

#[test]
fn the_generated_rbac_grants_the_deployments_where_the_plan_puts_them() {
    let yaml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(GENERATED[1].0))
        .expect("the child manifest");
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).expect("YAML");
    let roles = documents.iter().filter(|d| d["kind"] == "Role");
    // Besides the children's, the Role that reads the cluster's identity.
    let in_namespace = |r: &&serde_json::Value| r["metadata"]["namespace"] == "kube-system";
    let (identity, roles): (Vec<&serde_json::Value>, Vec<_>) = roles.partition(in_namespace);
    assert_eq!(
        identity.iter().map(|r| &r["rules"]).collect::<Vec<_>>(),
        [
            &serde_json::json!([{ "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"] }])
        ]
    );
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
    let refused = output_within(
        Command::new(env!("CARGO_BIN_EXE_fleet")).args(["rbac", "--context", "nowhere"]),
        Duration::from_secs(60),
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--context nowhere: not a cluster of the operator"),
        "{stderr}"
    );
}
