//! The demo's last lines: where the operator's metrics are, and the figures that tell most at a glance —
//! reconciles and children per context, and which contexts are up.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::demo::DemoError;

/// Fetches `/metrics` from the operator's probe server at `address`.
pub async fn scrape(address: SocketAddr) -> Result<String, DemoError> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = "GET /metrics HTTP/1.1\r\nHost: operator\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err("the probe server did not answer /metrics".into()),
    }
}

/// Two lines summing up `text` (OpenMetrics): reconciles per result and children applied per context,
/// then each context's `kubeplex_cluster_up`.
pub fn summary(text: &str) -> [String; 2] {
    let mut reconciles: BTreeMap<String, f64> = BTreeMap::new();
    let mut applied: BTreeMap<String, f64> = BTreeMap::new();
    let mut up: BTreeMap<String, f64> = BTreeMap::new();
    for (name, labels, value) in text.lines().filter_map(sample) {
        match name {
            "controller_runtime_reconcile_total" => {
                *reconciles.entry(label(labels, "result")).or_default() += value;
            }
            "kubeplex_children_applied_total" if label(labels, "result") == "success" => {
                *applied.entry(label(labels, "cluster")).or_default() += value;
            }
            "kubeplex_cluster_up" => {
                up.insert(label(labels, "cluster"), value);
            }
            _ => {}
        }
    }
    let list = |map: &BTreeMap<String, f64>, unit: &str| {
        map.iter()
            .map(|(key, value)| format!("{key} {value}{unit}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    [
        format!(
            "  reconciles: {} ({}) · children applied: {}",
            reconciles.values().sum::<f64>(),
            list(&reconciles, ""),
            list(&applied, "")
        ),
        format!("  contexts up (1) or down (0): {}", list(&up, "")),
    ]
}

/// A sample line as (name, labels, value); `None` for comments.
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    match series.split_once('{') {
        Some((name, labels)) => Some((name, labels.trim_end_matches('}'), value)),
        None => Some((series, "", value)),
    }
}

/// The value of label `name` in `labels` (`a="x",b="y"`); label values here never hold quotes or commas.
fn label(labels: &str, name: &str) -> String {
    labels
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"').to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_summary_sums_per_result_and_context() {
        let text = r#"# TYPE controller_runtime_reconcile counter
controller_runtime_reconcile_total{controller="app-deployer",cluster="control",result="success"} 4
controller_runtime_reconcile_total{controller="app-deployer",cluster="control",result="error"} 1
kubeplex_children_applied_total{controller="app-deployer",cluster="cluster-a",kind="Deployment.apps/v1",result="success"} 4
kubeplex_children_applied_total{controller="app-deployer",cluster="cluster-a",kind="Deployment.apps/v1",result="error"} 2
kubeplex_cluster_up{cluster="cluster-a"} 1
kubeplex_cluster_up{cluster="cluster-b"} 0
# EOF"#;
        let [first, second] = super::summary(text);
        assert_eq!(
            first,
            "  reconciles: 5 (error 1, success 4) · children applied: cluster-a 4"
        );
        assert_eq!(
            second,
            "  contexts up (1) or down (0): cluster-a 1, cluster-b 0"
        );
    }
}
