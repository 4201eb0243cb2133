//! The Helm charts (`chart/`, the operator in the control cluster; `chart-child/`, its rights in a child
//! cluster), tested with the helm that kubeplex-testenv builds from Go modules:
//!
//! - `helm lint --strict`, for each mode's values;
//! - `helm template` for each mode (single, leader election, 3 shards, secure metrics on and off, members
//!   off, every toggle on), each document applied with server-side apply in dry-run mode (strict field
//!   validation) to a real API server, the chart's own CRD installed first;
//! - the Roles the charts render grant what `fleet rbac` derives from the controller's plan for the same
//!   `fleet run` flags (the rendered Deployment's), nothing more, nothing less;
//! - with webhooks on, the configurations are what `fleet webhooks` prints;
//! - what each mode renders (flags, strategy, budget, ports, the scrape's scheme), and the values refused;
//! - `deploy/` is the chart rendered with `deploy/values.yaml` (`UPDATE_DEPLOY=1` renders it again).
//!
//! kubeconform is not run: it validates against JSON schemas it downloads from GitHub, and CI runs offline;
//! the dry-run validates against the test cluster's own OpenAPI instead.

/// The cases, one file each in `chart/`.
pub mod deploy;
pub mod dry_run;
pub mod rbac;
pub mod webhooks;

use crate::support::helm;

use std::collections::BTreeSet;

use helm::{CHILD_CHART, CONTROL_CHART, Document, chart_dir, run_helm, template};
use kubeplex_testenv::output_within;
use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;

/// The modes tested: a name and the values (`helm template` flags) that choose it.
pub const MODES: [(&str, &[&str]); 8] = [
    (
        "single replica",
        &["--set", "mode=single", "--set", "replicas=1"],
    ),
    ("leader election (the defaults)", &[]),
    ("3 shards", &["--set", "mode=shards", "--set", "shards=3"]),
    ("plain metrics", &["--set", "metrics.secure=false"]),
    ("no members", &["--set", "members.enabled=false"]),
    (
        "other namespaces",
        &[
            "--set",
            "namespace=apps",
            "--set",
            "leaseNamespace=leases",
            "--set",
            "members.namespace=members",
            "--set-json",
            "childNamespaces=[\"team-x\"]",
        ],
    ),
    (
        "every toggle on",
        &[
            "--set",
            "serviceMonitor.enabled=true",
            "--set",
            "metrics.certSecret=metrics-tls",
            "--set",
            "prometheusRule.enabled=true",
            "--set",
            "grafanaDashboard.enabled=true",
            "--set",
            "networkPolicy.enabled=true",
            "--set",
            "webhooks.enabled=true",
            "--set",
            "extraArgs={--log-format,json}",
            "--set",
            "extraEnv[0].name=FLEET_LEASE_DURATION",
            "--set-string",
            "extraEnv[0].value=20",
        ],
    ),
    (
        "webhooks, one replica, another namespace",
        &[
            "--set",
            "mode=single",
            "--set",
            "replicas=1",
            "--set",
            "webhooks.enabled=true",
            "--set",
            "webhooks.failurePolicy=Ignore",
            "--set",
            "webhooks.timeoutSeconds=5",
            "--set",
            "namespace=apps",
        ],
    ),
];

pub fn one<'a>(documents: &'a [Document], kind: &str, name: &str) -> &'a Document {
    let found: Vec<_> = documents
        .iter()
        .filter(|d| d.kind() == kind && d.name() == name)
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind} {name}: {found:?}");
    found[0]
}

fn container(documents: &[Document]) -> &Value {
    &one(documents, "Deployment", "kubeplex-fleet").value["spec"]["template"]["spec"]["containers"]
        [0]
}

pub fn args(documents: &[Document]) -> Vec<&str> {
    container(documents)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string"))
        .collect()
}

pub fn kinds(documents: &[Document]) -> BTreeSet<&str> {
    documents.iter().map(Document::kind).collect()
}

#[test]
fn the_charts_pass_helm_lint_in_every_mode() {
    for (mode, values) in MODES {
        let dir = chart_dir(CONTROL_CHART);
        let mut args = vec!["lint", "--strict", dir.to_str().unwrap()];
        args.extend_from_slice(values);
        let out = run_helm(&args);
        assert!(out.contains("0 chart(s) failed"), "{mode}: {out}");
    }
    let dir = chart_dir(CHILD_CHART);
    let out = run_helm(&["lint", "--strict", dir.to_str().unwrap()]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn each_mode_renders_its_flags_strategy_and_budget() {
    let documents = template(CONTROL_CHART, MODES[0].1);
    let deployment = one(&documents, "Deployment", "kubeplex-fleet");
    assert_eq!(deployment.value["spec"]["replicas"], 1);
    assert_eq!(
        deployment.value["spec"]["strategy"],
        json!({ "type": "Recreate" })
    );
    assert!(!args(&documents).contains(&"--leader-election"));
    assert!(!args(&documents).contains(&"--shards"));
    assert!(!kinds(&documents).contains("PodDisruptionBudget"));

    let documents = template(CONTROL_CHART, &[]);
    let deployment = one(&documents, "Deployment", "kubeplex-fleet");
    assert_eq!(deployment.value["spec"]["replicas"], 3);
    assert_eq!(
        deployment.value["spec"]["strategy"],
        json!({ "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 0, "maxSurge": 1 } })
    );
    let arguments = args(&documents);
    assert!(arguments.contains(&"--leader-election"), "{arguments:?}");
    assert!(
        arguments
            .windows(2)
            .any(|w| w == ["--members-from-secrets", "kubeplex.io/fleet=kubeplex-fleet"]),
        "{arguments:?}"
    );
    let budget = one(&documents, "PodDisruptionBudget", "kubeplex-fleet");
    assert_eq!(
        budget.value["spec"]["selector"],
        deployment.value["spec"]["selector"]
    );
    // The securityContext the Dockerfile's user matches.
    let pod = &deployment.value["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    let security = &container(&documents)["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");

    let documents = template(CONTROL_CHART, MODES[2].1);
    let arguments = args(&documents);
    assert!(
        arguments.windows(2).any(|w| w == ["--shards", "3"]),
        "{arguments:?}"
    );
    assert!(!arguments.contains(&"--leader-election"));

    let documents = template(CONTROL_CHART, MODES[4].1);
    assert!(!args(&documents).contains(&"--members-from-secrets"));

    // extraEnv and extraArgs reach the container.
    let documents = template(CONTROL_CHART, MODES[6].1);
    assert!(args(&documents).ends_with(&["--log-format", "json"]));
    assert!(
        container(&documents)["env"]
            .as_array()
            .unwrap()
            .contains(&json!({ "name": "FLEET_LEASE_DURATION", "value": "20" }))
    );
}

/// Secure metrics (the default): the flag, a `metrics` port, the Service's `https` port and a ServiceMonitor
/// that presents a token over HTTPS; without: the probe port, plain HTTP, the scrape annotations.
#[test]
fn metrics_are_scraped_as_the_mode_serves_them() {
    let toggles = MODES[6].1;
    let documents = template(CONTROL_CHART, toggles);
    let arguments = args(&documents);
    assert!(
        arguments
            .windows(2)
            .any(|w| w == ["--secure-metrics-port", "8443"]),
        "{arguments:?}"
    );
    let ports = &container(&documents)["ports"];
    assert!(
        ports
            .as_array()
            .unwrap()
            .contains(&json!({ "name": "metrics", "containerPort": 8443, "protocol": "TCP" })),
        "{ports}"
    );
    let service = one(&documents, "Service", "kubeplex-fleet");
    assert_eq!(
        service.value["spec"]["ports"],
        json!([{ "name": "https", "port": 8443, "targetPort": "metrics", "protocol": "TCP" }])
    );
    let monitor = one(&documents, "ServiceMonitor", "kubeplex-fleet");
    let endpoint = &monitor.value["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "https");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(
        endpoint["tlsConfig"],
        json!({ "ca": { "secret": { "name": "metrics-tls", "key": "ca.crt" } },
                "serverName": "kubeplex-fleet.kubeplex-system.svc" }),
        "verified by default"
    );
    assert!(
        arguments
            .windows(2)
            .any(|w| w == ["--secure-metrics-cert-dir", "/etc/kubeplex/metrics-tls"]),
        "{arguments:?}"
    );
    let mut unverified = toggles.to_vec();
    unverified.extend([
        "--set",
        "metrics.certSecret=",
        "--set",
        "serviceMonitor.insecureSkipVerify=true",
    ]);
    let documents = template(CONTROL_CHART, &unverified);
    let endpoint =
        &one(&documents, "ServiceMonitor", "kubeplex-fleet").value["spec"]["endpoints"][0];
    assert_eq!(endpoint["tlsConfig"], json!({ "insecureSkipVerify": true }));
    assert!(!args(&documents).contains(&"--secure-metrics-cert-dir"));
    let documents = template(CONTROL_CHART, toggles);
    let deployment = one(&documents, "Deployment", "kubeplex-fleet");
    assert!(
        deployment.value["spec"]["template"]["metadata"]
            .get("annotations")
            .is_none(),
        "no scrape annotations: an annotation-driven Prometheus would get 401"
    );
    let policy = one(&documents, "NetworkPolicy", "kubeplex-fleet");
    assert_eq!(
        policy.value["spec"]["ingress"][0]["ports"][0]["port"],
        "metrics"
    );
    let dashboard = one(&documents, "ConfigMap", "kubeplex-fleet-dashboard");
    let json: Value = serde_json::from_str(
        dashboard.value["data"]["kubeplex-fleet.json"]
            .as_str()
            .unwrap(),
    )
    .expect("the dashboard is JSON");
    assert!(json["panels"].is_array());
    let rule = one(&documents, "PrometheusRule", "kubeplex-fleet");
    assert_eq!(
        rule.value["spec"]["groups"][0]["rules"][0]["alert"],
        "KubeplexClusterDown"
    );

    let mut plain = toggles.to_vec();
    plain.extend(["--set", "metrics.secure=false"]);
    let documents = template(CONTROL_CHART, &plain);
    assert!(!args(&documents).contains(&"--secure-metrics-port"));
    let service = one(&documents, "Service", "kubeplex-fleet");
    assert_eq!(
        service.value["spec"]["ports"],
        json!([{ "name": "metrics", "port": 8080, "targetPort": "probes", "protocol": "TCP" }])
    );
    let endpoint =
        &one(&documents, "ServiceMonitor", "kubeplex-fleet").value["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "http");
    assert_eq!(endpoint["port"], "metrics");
    let annotations = &one(&documents, "Deployment", "kubeplex-fleet").value["spec"]["template"]["metadata"]
        ["annotations"];
    assert_eq!(annotations["prometheus.io/port"], "8080");
}

/// Values that cannot work are refused by `helm template`, in words.
#[test]
fn values_that_cannot_work_are_refused() {
    let dir = chart_dir(CONTROL_CHART);
    for (values, words) in [
        (
            &["--set", "mode=single"][..],
            "mode single runs one replica",
        ),
        (
            &["--set", "mode=primary"],
            "is not single, leaderElection or shards",
        ),
        (&["--set", "members.selector="], "members.selector"),
        (
            &["--set", "serviceMonitor.enabled=true"],
            "serviceMonitor: the scrape verifies the operator's certificate",
        ),
        (
            &["--set", "members.leavePolicy=keep"],
            "is not delete or orphan",
        ),
    ] {
        let output = output_within(
            Command::new(helm::helm())
                .args(["template", "x", dir.to_str().unwrap()])
                .args(values),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{values:?} accepted");
        assert!(stderr.contains(words), "{values:?}: {stderr}");
    }
}

/// `value` with every number as a float.
fn floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(floats).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), floats(v))).collect())
        }
        other => other.clone(),
    }
}

/// The chart's CRD is `fleet crd`'s, kept on uninstall; `crds.install=false` leaves it out.
#[test]
fn the_crd_is_what_fleet_crd_prints_and_is_kept() {
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_fleet")).arg("crd"),
        Duration::from_secs(60),
    );
    assert!(output.status.success());
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let path = chart_dir(CONTROL_CHART).join("files/appdeployments.demo.kubeplex.dev.json");
    let file = std::fs::read_to_string(&path).unwrap();
    if deploy::updating() {
        std::fs::write(&path, String::from_utf8(output.stdout).unwrap()).unwrap();
    } else {
        let file: Value = serde_json::from_str(&file).unwrap();
        assert_eq!(
            file,
            printed,
            "{} is not what `fleet crd` prints; UPDATE_DEPLOY=1 cargo test -p kubeplex-fleet --test operator chart:: \
             writes it",
            path.display()
        );
    }

    let documents = template(CONTROL_CHART, &[]);
    let crd = one(
        &documents,
        "CustomResourceDefinition",
        "appdeployments.demo.kubeplex.dev",
    );
    assert_eq!(
        crd.value["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    // Helm reads the file's numbers as floats (`minimum: 0.0`): the same schema.
    assert_eq!(floats(&crd.value["spec"]), floats(&printed["spec"]));
    let without = template(CONTROL_CHART, &["--set", "crds.install=false"]);
    assert!(!kinds(&without).contains("CustomResourceDefinition"));
}
