//! The secure metrics flags, and the RBAC `fleet rbac` prints for them.

use clap::CommandFactory as _;

use super::*;

#[test]
fn run_takes_the_secure_metrics_audiences() {
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--secure-metrics-port",
        "8443",
        "--secure-metrics-audience",
        "fleet-metrics,other",
        "--secure-metrics-audience",
        "third",
    ])
    .unwrap();
    let Command::Run { operator, .. } = cli.command else {
        panic!("not `run`: {cli:?}");
    };
    assert_eq!(
        operator.secure_metrics_audiences,
        ["fleet-metrics", "other", "third"]
    );
    let alone = Cli::try_parse_from(["fleet", "run", "--secure-metrics-audience", "x"]);
    assert!(
        alone.is_err(),
        "an audience without secure metrics is refused"
    );
}

#[test]
fn run_takes_the_secure_metrics_port_and_its_certificate() {
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--secure-metrics-port",
        "8443",
        "--secure-metrics-cert-dir",
        "/certs",
    ])
    .unwrap();
    let Command::Run {
        operator:
            OperatorFlags {
                secure_metrics_port: Some(8443),
                secure_metrics_cert_dir: Some(dir),
                ..
            },
        ..
    } = cli.command
    else {
        panic!("secure metrics not taken: {cli:?}");
    };
    assert_eq!(dir, std::path::Path::new("/certs"));
    let alone = Cli::try_parse_from(["fleet", "run", "--secure-metrics-cert-dir", "/certs"]);
    let refused = alone.unwrap_err().to_string();
    assert!(
        refused.contains("--secure-metrics-port <PORT>"),
        "{refused}"
    );
    let command = Cli::command();
    let run = command.find_subcommand("run").unwrap();
    let env = run
        .get_arguments()
        .find(|a| a.get_id() == "secure_metrics_port")
        .and_then(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned());
    assert_eq!(env.as_deref(), Some("FLEET_SECURE_METRICS_PORT"));
}

/// `fleet rbac` with the flag prints the reviews' rules and the scrapers' role, in the control cluster only.
#[test]
fn rbac_with_secure_metrics_adds_the_reviews_and_a_metrics_reader() {
    let yaml = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["fleet", "rbac"][..], args].concat()).unwrap();
        let Command::Rbac { rbac, operator } = cli.command else {
            panic!("not `rbac`: {cli:?}");
        };
        rbac.yaml(operator, "fleet rbac").unwrap()
    };
    let control = yaml(&["--context", "control", "--secure-metrics-port", "8443"]);
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&control).unwrap();
    let cluster_role = documents
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "kubeplex-fleet")
        .expect("the operator's ClusterRole");
    assert_eq!(
        cluster_role["rules"],
        serde_json::json!([
            { "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"] },
            { "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"] },
        ])
    );
    assert!(documents.iter().any(|d| d["kind"] == "ClusterRoleBinding"));
    let reader = documents
        .iter()
        .find(|d| d["metadata"]["name"] == "kubeplex-fleet-metrics-reader")
        .expect("the metrics reader");
    assert_eq!(reader["kind"], "ClusterRole");
    assert_eq!(
        reader["rules"],
        serde_json::json!([{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }])
    );
    let child = yaml(&["--context", "cluster-a", "--secure-metrics-port", "8443"]);
    assert!(!child.contains("ClusterRole"), "{child}");
    let plain = yaml(&["--context", "control"]);
    assert!(
        !plain.contains("tokenreviews") && !plain.contains("metrics-reader"),
        "{plain}"
    );
}
