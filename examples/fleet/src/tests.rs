//! The command line as parsed, and the logging set up from it.
use std::sync::{Arc, Mutex};

use clap::CommandFactory as _;

use super::*;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn log_one_warning(format: LogFormat, ansi: bool) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = subscriber(format, ansi, move || writer.clone(), Vec::new());
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(context = "cluster-a", "cannot reach the cluster");
    });
    String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn the_command_line_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn run_defaults_to_probes_on_port_8080_and_text_logs() {
    let cli = Cli::try_parse_from(["fleet", "run"]).unwrap();
    assert_eq!(cli.log_format, LogFormat::Text);
    let Command::Run {
        probe_address,
        otlp_endpoint: None,
        operator:
            OperatorFlags {
                namespace,
                child_namespaces,
                leader_election: false,
                shards: None,
                lease_namespace,
                identity: None,
                lease_duration: None,
                renew_deadline: None,
                retry_period: None,
                secure_metrics_port: None,
                secure_metrics_cert_dir: None,
                members,
            },
    } = cli.command
    else {
        panic!("not `run`: {cli:?}");
    };
    assert!(!members.takes_members(), "no members unless asked");
    assert_eq!(lease_namespace, "crds");
    assert_eq!(probe_address, "0.0.0.0:8080".parse().unwrap());
    assert_eq!(namespace, "crds");
    assert_eq!(child_namespaces, kubeplex_fleet::CHILD_NAMESPACES);
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--probe-address",
        "127.0.0.1:9090",
        "--log-format",
        "json",
    ])
    .unwrap();
    assert_eq!(cli.log_format, LogFormat::Json);
    assert!(
        matches!(cli.command, Command::Run { probe_address, .. } if probe_address.port() == 9090)
    );
}

#[test]
fn run_takes_its_namespaces_from_flags() {
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--namespace",
        "apps",
        "--child-namespaces",
        "team-a,team-b",
    ])
    .unwrap();
    let Command::Run {
        operator:
            OperatorFlags {
                namespace,
                child_namespaces,
                ..
            },
        ..
    } = cli.command
    else {
        panic!("not `run`: {cli:?}");
    };
    assert_eq!(namespace, "apps");
    assert_eq!(child_namespaces, ["team-a", "team-b"]);
}

#[test]
fn run_takes_an_otlp_endpoint() {
    let matches = Cli::command()
        .try_get_matches_from(["fleet", "run", "--otlp-endpoint", "http://collector:4318"])
        .unwrap();
    let cli = Cli::from_arg_matches(&matches).unwrap();
    assert_eq!(
        otlp_endpoint(&cli, &matches),
        Some(OtlpEndpoint {
            url: "http://collector:4318".to_owned(),
            from_env: false,
        })
    );
}

#[cfg(not(feature = "otlp"))]
#[test]
fn without_the_otlp_feature_the_flag_is_refused_and_the_variable_ignored() {
    let flag = OtlpEndpoint {
        url: "http://collector:4318".to_owned(),
        from_env: false,
    };
    let error = otlp_layers(Some(&flag)).err().unwrap().to_string();
    assert_eq!(
        error,
        "--otlp-endpoint: built without the otlp feature; rebuild with --features otlp"
    );
    let variable = OtlpEndpoint {
        from_env: true,
        ..flag
    };
    assert!(otlp_layers(Some(&variable)).unwrap().0.is_empty());
    assert!(otlp_layers(None).unwrap().0.is_empty());
}

#[cfg(feature = "otlp")]
#[test]
fn with_the_otlp_feature_the_flag_adds_the_exporter() {
    let flag = OtlpEndpoint {
        url: "http://127.0.0.1:4318".to_owned(),
        from_env: false,
    };
    let (layers, exporter) = otlp_layers(Some(&flag)).unwrap();
    assert_eq!(layers.len(), 1);
    exporter.stop().unwrap();
    let bad = OtlpEndpoint {
        url: "collector:4318".to_owned(),
        from_env: false,
    };
    assert!(otlp_layers(Some(&bad)).is_err());
}

#[test]
fn text_logs_have_colour_codes_only_on_a_terminal() {
    let plain = log_one_warning(LogFormat::Text, false);
    assert!(plain.contains("WARN"), "{plain}");
    assert!(
        plain.contains("cannot reach the cluster context=\"cluster-a\""),
        "{plain}"
    );
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(log_one_warning(LogFormat::Text, true).contains('\x1b'));
}

#[test]
fn json_logs_are_one_object_per_line_with_the_fields_on_top() {
    let out = log_one_warning(LogFormat::Json, true);
    let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(line["message"], "cannot reach the cluster", "{line}");
    assert_eq!(line["context"], "cluster-a", "{line}");
    assert!(!out.contains('\x1b'), "{out:?}");
}

#[test]
fn run_takes_leader_election_from_flags() {
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--leader-election",
        "--lease-namespace",
        "operators",
        "--identity",
        "replica-1",
    ])
    .unwrap();
    let Command::Run {
        operator:
            OperatorFlags {
                leader_election: true,
                lease_namespace,
                identity: Some(identity),
                ..
            },
        ..
    } = cli.command
    else {
        panic!("leader election not taken: {cli:?}");
    };
    assert_eq!(
        (lease_namespace.as_str(), identity.as_str()),
        ("operators", "replica-1")
    );
}

#[test]
fn run_takes_the_shards_and_refuses_them_with_leader_election() {
    let cli = Cli::try_parse_from(["fleet", "run", "--shards", "12", "--identity", "r-1"]).unwrap();
    let Command::Run {
        operator:
            OperatorFlags {
                shards: Some(12),
                leader_election: false,
                ..
            },
        ..
    } = cli.command
    else {
        panic!("shards not taken: {cli:?}");
    };
    let both = Cli::try_parse_from(["fleet", "run", "--shards", "3", "--leader-election"]);
    let refused = both.unwrap_err().to_string();
    assert!(refused.contains("cannot be used with"), "{refused}");
    let none = Cli::try_parse_from(["fleet", "run", "--shards", "0"]).unwrap_err();
    assert!(none.to_string().contains("--shards"), "{none}");
}

#[test]
fn run_takes_the_election_timings_in_seconds() {
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--leader-election",
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        "0.5",
    ])
    .unwrap();
    let Command::Run {
        operator:
            OperatorFlags {
                lease_duration: Some(lease),
                renew_deadline: Some(renew),
                retry_period: Some(retry),
                ..
            },
        ..
    } = cli.command
    else {
        panic!("timings not taken: {cli:?}");
    };
    assert_eq!(
        (lease, renew, retry),
        (
            Duration::from_secs(4),
            Duration::from_secs(3),
            Duration::from_millis(500)
        )
    );
    for bad in ["0", "soon", "inf", "1e9"] {
        let refused = Cli::try_parse_from(["fleet", "run", "--retry-period", bad]).unwrap_err();
        assert!(
            refused.to_string().contains("positive number of seconds"),
            "{bad}: {refused}"
        );
    }
}

fn members_of(args: &[&str]) -> Result<MemberFlags, clap::Error> {
    let cli = Cli::try_parse_from(["fleet", "run"].iter().chain(args))?;
    match cli.command {
        Command::Run { operator, .. } => Ok(operator.members),
        other => panic!("not `run`: {other:?}"),
    }
}

#[test]
fn run_takes_members_from_secrets_with_a_namespace_and_a_leave_policy() {
    use members_cli::MemberLeavePolicy;
    let selector = "kubeplex.io/fleet=prod";
    // Defaults: the operator's namespace, and the children deleted when a member leaves.
    let members = members_of(&["--members-from-secrets", selector]).unwrap();
    assert_eq!(members.members_from_secrets.as_deref(), Some(selector));
    assert_eq!(members.members_namespace, kubeplex_fleet::MEMBERS_NAMESPACE);
    assert_eq!(members.member_leave_policy, MemberLeavePolicy::Delete);
    assert!(members.takes_members());
    assert_eq!(members.leave_policy(), kubeplex::LeavePolicy::Delete);

    let members = members_of(&[
        "--members-from-secrets",
        selector,
        "--members-namespace",
        "fleet-system",
        "--member-leave-policy",
        "orphan",
    ])
    .unwrap();
    assert_eq!(members.members_namespace, "fleet-system");
    assert_eq!(members.leave_policy(), kubeplex::LeavePolicy::Orphan);
    // With the typed contexts' other flags.
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--leader-election",
        "--members-from-secrets",
        selector,
    ]);
    assert!(matches!(
        cli.unwrap().command,
        Command::Run {
            operator: OperatorFlags {
                leader_election: true,
                ..
            },
            ..
        }
    ));
}

#[test]
fn the_member_flags_need_a_selector_and_refuse_bad_values() {
    for args in [
        &["--members-namespace", "fleet-system"][..],
        &["--member-leave-policy", "orphan"],
    ] {
        let refused = members_of(args).unwrap_err();
        assert_eq!(
            refused.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}: {refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("--members-from-secrets <SELECTOR>"),
            "{refused}"
        );
    }
    let empty = members_of(&["--members-from-secrets", " "])
        .unwrap_err()
        .to_string();
    assert!(
        empty.contains("an empty one would take every Secret of the namespace"),
        "{empty}"
    );
    let policy = members_of(&[
        "--members-from-secrets",
        "a=b",
        "--member-leave-policy",
        "keep",
    ]);
    let policy = policy.unwrap_err().to_string();
    assert!(
        policy.contains("[possible values: delete, orphan]"),
        "{policy}"
    );
}

/// Each member flag can come from the environment, as the Deployment in deploy/ may set it (the values
/// themselves are read from a real environment in tests/cli.rs).
#[test]
fn the_member_flags_are_also_environment_variables() {
    let command = Cli::command();
    let run = command.find_subcommand("run").unwrap();
    let env_of = |id: &str| {
        let arg = run.get_arguments().find(|a| a.get_id() == id).unwrap();
        arg.get_env().map(|e| e.to_string_lossy().into_owned())
    };
    assert_eq!(
        env_of("members_from_secrets").as_deref(),
        Some("FLEET_MEMBERS_FROM_SECRETS")
    );
    assert_eq!(
        env_of("members_namespace").as_deref(),
        Some("FLEET_MEMBERS_NAMESPACE")
    );
    assert_eq!(
        env_of("member_leave_policy").as_deref(),
        Some("FLEET_MEMBER_LEAVE_POLICY")
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

#[test]
fn run_takes_members_from_cluster_profiles_or_cluster_api_one_source_at_a_time() {
    let members = members_of(&[
        "--members-from-cluster-profiles",
        "fleet-system",
        "--access-providers",
        "/etc/fleet/access-providers.json",
    ])
    .unwrap();
    assert_eq!(
        members.members_from_cluster_profiles.as_deref(),
        Some("fleet-system")
    );
    assert!(members.takes_members());
    let members = members_of(&["--members-from-cluster-api", "capi-system"]).unwrap();
    assert_eq!(
        members.members_from_cluster_api.as_deref(),
        Some("capi-system")
    );
    assert_eq!(members.leave_policy(), kubeplex::LeavePolicy::Delete);
    // Two sources, or an access-providers file without profiles: refused.
    let both = members_of(&[
        "--members-from-cluster-api",
        "a",
        "--members-from-cluster-profiles",
        "b",
    ]);
    assert_eq!(
        both.unwrap_err().kind(),
        clap::error::ErrorKind::ArgumentConflict
    );
    let alone = members_of(&["--access-providers", "f.json"]);
    assert_eq!(
        alone.unwrap_err().kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    // An access-providers file that cannot be read fails the manager's assembly, saying which file.
    let flags = members_of(&[
        "--members-from-cluster-profiles",
        "b",
        "--access-providers",
        "/nonexistent/access.json",
    ])
    .unwrap();
    let Err(error) = flags.add_to(kubeplex::Manager::new()) else {
        panic!("an unreadable access-providers file was taken");
    };
    assert!(
        error.to_string().contains("/nonexistent/access.json"),
        "{error}"
    );
}
