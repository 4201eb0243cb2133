//! The chart's webhooks against `fleet webhooks` and `fleet crd`.

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::output_within;
use serde_json::Value;

use super::{MODES, args, kinds, one};
use crate::support::helm::{CONTROL_CHART, template};

/// With webhooks on, the chart's configurations are what `fleet webhooks --service` prints for the same
/// values, calling the Service it renders; and the operator keeps its CA in the lease namespace (passed in
/// one replica too).
#[test]
fn the_charts_webhooks_are_what_fleet_webhooks_prints() {
    let documents = template(CONTROL_CHART, MODES[7].1);
    let args = args(&documents);
    for pair in [["--lease-namespace", "apps"], ["--webhook-port", "9443"]] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    let service = one(&documents, "Service", "kubeplex-fleet-webhook");
    assert_eq!(service.value["spec"]["ports"][0]["targetPort"], "webhook");
    let fleet = env!("CARGO_BIN_EXE_fleet");
    let printed = output_within(
        Command::new(fleet).args([
            "webhooks",
            "--service",
            "kubeplex-fleet-webhook.kubeplex-system",
            "--namespace",
            "apps",
            "--failure-policy",
            "Ignore",
            "--timeout-seconds",
            "5",
        ]),
        Duration::from_secs(30),
    );
    assert!(printed.status.success(), "{printed:?}");
    let printed: Vec<Value> = String::from_utf8(printed.stdout)
        .unwrap()
        .split("\n---\n")
        .map(|text| serde_saphyr::from_str(text).unwrap())
        .collect();
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let rendered = one(&documents, kind, "fleet-operator");
        let printed = printed.iter().find(|p| p["kind"] == kind).unwrap();
        assert_eq!(rendered.value["webhooks"], printed["webhooks"], "{kind}");
    }
    // The CRD serves v2, converted by the same Service: what `fleet crd --service` prints.
    let printed = output_within(
        Command::new(fleet).args(["crd", "--service", "kubeplex-fleet-webhook.kubeplex-system"]),
        Duration::from_secs(30),
    );
    assert!(printed.status.success(), "{printed:?}");
    let printed: Value = serde_json::from_slice(&printed.stdout).unwrap();
    let crd = one(
        &documents,
        "CustomResourceDefinition",
        "appdeployments.demo.kubeplex.dev",
    );
    assert_eq!(
        crd.value["spec"]["conversion"],
        printed["spec"]["conversion"]
    );
    let served = |crd: &Value| -> Vec<(Value, Value, Value)> {
        let versions = crd["spec"]["versions"].as_array().unwrap();
        (versions.iter())
            .map(|v| (v["name"].clone(), v["served"].clone(), v["storage"].clone()))
            .collect()
    };
    assert_eq!(served(&crd.value), served(&printed));
    assert_eq!(served(&printed).len(), 2, "v1 and v2");
    let plain = template(CONTROL_CHART, &[]);
    assert!(
        !kinds(&plain).contains("ValidatingWebhookConfiguration"),
        "off by default"
    );
}
