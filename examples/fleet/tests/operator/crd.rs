//! The CRD that `fleet crd` prints is accepted by a real API server without a warning.

use std::process::Command;

use kube::Client;
use kube::client::Body;
use kubeplex_testenv::output_within;
use serde_json::json;
use std::time::Duration;

/// Creates `crd` and returns the API server's `Warning` headers.
async fn create_with_warnings(client: &Client, crd: &serde_json::Value) -> Vec<String> {
    let request = http::Request::post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(crd).unwrap()))
        .unwrap();
    let response = client.send(request).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::CREATED, "{response:?}");
    response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|w| w.to_str().unwrap().to_owned())
        .collect()
}

/// A CRD with the format schemars gives a `u32`.
fn crd_with_uint32() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "counters.test.kubeplex.dev" },
        "spec": {
            "group": "test.kubeplex.dev",
            "names": { "kind": "Counter", "plural": "counters", "singular": "counter" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "count": { "type": "integer", "format": "uint32", "minimum": 0 } }
                } }
            }]
        }
    })
}

#[tokio::test]
async fn the_printed_crd_is_created_without_warnings() {
    // The suite's control cluster, which has the example's CRD already: the printed one is created under a
    // group of its own.
    let client = crate::support::shared()
        .await
        .client("control")
        .await
        .unwrap();

    // The warnings reach us: a `uint32` draws one...
    let warnings = create_with_warnings(&client, &crd_with_uint32()).await;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"unrecognized format \"uint32\""#)),
        "{warnings:?}"
    );

    // ...and what `fleet crd` prints draws none.
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_fleet")).arg("crd"),
        Duration::from_secs(60),
    );
    assert!(output.status.success());
    let mut printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let group = "printed.test.kubeplex.dev";
    let plural = printed["spec"]["names"]["plural"]
        .as_str()
        .unwrap()
        .to_owned();
    printed["metadata"]["name"] = json!(format!("{plural}.{group}"));
    printed["spec"]["group"] = json!(group);
    let warnings = create_with_warnings(&client, &printed).await;
    assert_eq!(warnings, Vec::<String>::new());
}
