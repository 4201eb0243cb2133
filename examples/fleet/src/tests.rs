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
        tracing::warn!(cluster = "cluster-a", "cannot reach the cluster");
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
                secure_metrics_audiences,
                webhook_port: None,
                webhook_cert_dir: None,
                webhook_dns_names,
                members,
            },
    } = cli.command
    else {
        panic!("not `run`: {cli:?}");
    };
    assert!(!members.takes_members(), "no members unless asked");
    assert!(secure_metrics_audiences.is_empty());
    assert!(webhook_dns_names.is_empty(), "no webhooks unless asked");
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
        plain.contains("cannot reach the cluster cluster=\"cluster-a\""),
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
    assert_eq!(line["cluster"], "cluster-a", "{line}");
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

mod members;
mod secure_metrics;
