//! `deploy/`'s plain YAML is the charts rendered with `deploy/values.yaml` (and `deploy/child-values.yaml`),
//! one file per template; `UPDATE_DEPLOY=1` writes it instead of comparing.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::helm::{CHILD_CHART, CONTROL_CHART, template};

/// Which file of `deploy/` each template goes to.
type Targets = &'static [(&'static str, &'static str)];

/// Each chart, its values file under `deploy/`, and which file of `deploy/` each template goes to.
const RENDERED: [(&str, &str, Targets); 2] = [
    (
        CONTROL_CHART,
        "values.yaml",
        &[
            ("serviceaccount.yaml", "control/10-serviceaccount.yaml"),
            ("rbac.yaml", "control/20-rbac.yaml"),
            ("deployment.yaml", "control/40-deployment.yaml"),
            (
                "poddisruptionbudget.yaml",
                "control/45-poddisruptionbudget.yaml",
            ),
            ("service.yaml", "control/50-service.yaml"),
            ("networkpolicy.yaml", "control/55-networkpolicy.yaml"),
            ("servicemonitor.yaml", "monitoring/servicemonitor.yaml"),
            ("prometheusrule.yaml", "monitoring/alerts.yaml"),
        ],
    ),
    (
        CHILD_CHART,
        "child-values.yaml",
        &[
            ("serviceaccount.yaml", "child/10-serviceaccount.yaml"),
            ("rbac.yaml", "child/20-rbac.yaml"),
        ],
    ),
];

const COMMAND: &str = "UPDATE_DEPLOY=1 cargo test -p kubeplex-fleet --test operator chart::";

/// Whether the test writes what it would compare (`UPDATE_DEPLOY=1`).
pub fn updating() -> bool {
    let updating = std::env::var_os("UPDATE_DEPLOY").is_some_and(|v| v == "1");
    // CI compares; a run that rewrote deploy/ would pass whatever the charts render.
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    assert!(
        !(updating && ci),
        "UPDATE_DEPLOY=1 is refused under CI=true"
    );
    updating
}

/// `deploy/`'s files as the charts render them: path → text.
fn rendered() -> BTreeMap<String, String> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut files = BTreeMap::new();
    for (chart, values, targets) in RENDERED {
        let values_path = deploy.join(values);
        let documents = template(chart, &["--values", values_path.to_str().unwrap()]);
        for document in &documents {
            let (_, file) = targets
                .iter()
                .find(|(template, _)| *template == document.template)
                .unwrap_or_else(|| {
                    panic!(
                        "deploy/{values} renders {}, which no file of deploy/ takes: add it to RENDERED \
                         or turn it off in deploy/{values}",
                        document.describe()
                    )
                });
            let text = files.entry((*file).to_owned()).or_insert_with(|| {
                format!(
                    "# Rendered from examples/fleet/{chart} with deploy/{values}: do not edit. Render it \
                     again with\n#   {COMMAND}\n"
                )
            });
            text.push_str("---\n");
            text.push_str(document.text.trim_end());
            text.push('\n');
        }
    }
    files
}

#[test]
fn deploy_is_the_charts_rendered() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut stale = Vec::new();
    for (file, text) in rendered() {
        let path = deploy.join(&file);
        if updating() {
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "examples/fleet/deploy/ differs from the charts rendered: {stale:?}; render it again with\n  {COMMAND}"
    );
}
