//! The charts (`chart/`, `chart-child/`) as the tests see them: `helm template` and `helm lint` with the helm
//! kubeplex-testenv builds from Go modules, and the rendered documents.
#![allow(dead_code)] // Each test binary uses a different part.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kubeplex_testenv::output_within;
use serde_json::Value;
use std::time::Duration;

/// The operator's chart and the child clusters' chart.
pub const CONTROL_CHART: &str = "chart";
pub const CHILD_CHART: &str = "chart-child";
/// The release and namespace `deploy/` is rendered with, and the least-privilege test installs.
pub const RELEASE: &str = "kubeplex-fleet";
pub const NAMESPACE: &str = "kubeplex-system";

/// The helm program: built into the testenv cache on the first run (minutes), then found there.
pub fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        kubeplex_testenv::Helm::locate_or_build().unwrap_or_else(|e| panic!("helm: {e}"))
    })
}

pub fn chart_dir(chart: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(chart)
}

/// One document `helm template` rendered, with the template it came from.
#[derive(Clone, Debug)]
pub struct Document {
    /// The template's file name, e.g. `deployment.yaml`.
    pub template: String,
    /// The document's text as rendered, comments included.
    pub text: String,
    pub value: Value,
}

impl Document {
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.value["metadata"]["namespace"].as_str()
    }

    pub fn describe(&self) -> String {
        format!(
            "{} {}/{} ({})",
            self.kind(),
            self.namespace().unwrap_or(""),
            self.name(),
            self.template
        )
    }
}

/// Runs helm with `args`; its stdout, or a panic with its stderr.
pub fn run_helm(args: &[&str]) -> String {
    let output = output_within(Command::new(helm()).args(args), Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "helm {args:?} failed: {stderr}");
    String::from_utf8(output.stdout).expect("helm prints UTF-8")
}

/// `helm template RELEASE <chart> -n NAMESPACE <values>`, as text.
pub fn template_text(chart: &str, values: &[&str]) -> String {
    let dir = chart_dir(chart);
    let dir = dir.to_str().expect("a UTF-8 path");
    let mut args = vec!["template", RELEASE, dir, "--namespace", NAMESPACE];
    args.extend_from_slice(values);
    run_helm(&args)
}

/// [`template_text`] split into its documents (empty ones left out).
pub fn template(chart: &str, values: &[&str]) -> Vec<Document> {
    documents(&template_text(chart, values))
}

/// The documents of `helm template`'s output, each named by its `# Source:` line.
pub fn documents(rendered: &str) -> Vec<Document> {
    let mut out = Vec::new();
    for text in rendered.split("\n---\n") {
        let text = text.trim_start_matches("---\n");
        let Some(source) = text
            .lines()
            .find_map(|line| line.strip_prefix("# Source: "))
        else {
            continue;
        };
        let template = source.rsplit('/').next().unwrap_or(source).to_owned();
        let value: Value = serde_saphyr::from_str(text)
            .unwrap_or_else(|e| panic!("{source} rendered no valid YAML: {e}\n{text}"));
        if value.is_null() {
            continue;
        }
        out.push(Document {
            template,
            text: text.to_owned(),
            value,
        });
    }
    out
}

/// An (apiGroup, resource, verb) a Role grants in a namespace (None: a ClusterRole).
pub type Grant = (Option<String>, String, String, String);

/// Every grant of the Roles and ClusterRoles among `documents` that grant on resources.
pub fn grants(documents: &[Value]) -> BTreeSet<Grant> {
    let strings = |rule: &Value, field: &str| -> Vec<String> {
        rule[field]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect()
    };
    let mut out = BTreeSet::new();
    for role in documents
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
    {
        let namespace = role["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in role["rules"].as_array().into_iter().flatten() {
            for group in strings(rule, "apiGroups") {
                for resource in strings(rule, "resources") {
                    for verb in strings(rule, "verbs") {
                        out.insert((namespace.clone(), group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    out
}

/// The rendered Deployment's `fleet run` arguments that `fleet rbac` takes too (the operator's flags).
pub fn operator_flags(documents: &[Document]) -> Vec<String> {
    let deployment = documents
        .iter()
        .find(|d| d.kind() == "Deployment")
        .expect("a Deployment");
    let args: Vec<String> = deployment.value["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("run"));
    let mut flags = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            // `fleet run`'s own, not the operator's.
            "--probe-address" | "--secure-metrics-port" | "--secure-metrics-cert-dir" => {
                rest.next();
            }
            _ => flags.push(arg.clone()),
        }
    }
    flags
}

/// What `fleet rbac --context <context> <flags>` prints, parsed.
pub fn fleet_rbac(context: &str, flags: &[String]) -> Vec<Value> {
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_fleet"))
            .args(["rbac", "--context", context])
            .args(flags)
            .env_remove("RUST_LOG"),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "fleet rbac --context {context} {flags:?}: {stderr}"
    );
    let yaml = String::from_utf8(output.stdout).expect("UTF-8");
    serde_saphyr::from_multiple(&yaml).expect("fleet rbac prints YAML")
}
