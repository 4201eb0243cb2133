//! Reading the monitoring files: paths, text, YAML documents, and the Grafana dashboard's panels and queries.

use std::path::{Path, PathBuf};

use serde_json::Value;

pub(crate) fn monitoring(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/monitoring")
        .join(file)
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub(crate) fn dashboard() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("chart/dashboards/kubeplex-fleet.json");
    serde_json::from_str(&read(&path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every panel, rows' nested panels included, rows themselves excluded.
pub(crate) fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            if panel["type"] == "row" {
                walk(&panel["panels"], out);
            } else {
                out.push(panel);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

pub(crate) fn title(panel: &Value) -> &str {
    panel["title"].as_str().expect("every panel has a title")
}

pub(crate) fn exprs(panel: &Value) -> Vec<&str> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

pub(crate) fn yaml(path: &Path) -> Vec<Value> {
    serde_saphyr::from_multiple(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}
