//! Every mode's rendering applied to a real API server with server-side apply in dry-run mode (strict field
//! validation): the chart's CRD installed for real first, and the Prometheus Operator's two kinds as minimal
//! CRDs (their `spec` unchecked: the test clusters run no Prometheus Operator, whose CRDs are megabytes of
//! schema; `metrics_are_scraped_as_the_mode_serves_them` checks what the chart puts in them).

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Client, ResourceExt as _};
use kubeplex_testenv::Polling;
use serde_json::{Value, json};

use super::MODES;
use crate::support::helm::{CHILD_CHART, CONTROL_CHART, Document, NAMESPACE, template};

const FIELD_MANAGER: &str = "kubeplex-fleet-chart-tests";
const WAIT: Duration = Duration::from_secs(60);

/// A CRD serving `kind` in monitoring.coreos.com/v1 that takes any `spec`.
fn monitoring_crd(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.monitoring.coreos.com") },
        "spec": {
            "group": "monitoring.coreos.com",
            "names": { "kind": kind, "plural": plural, "singular": kind.to_lowercase() },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": true
                    } }
                } }
            }]
        }
    })
}

/// Server-side applies `document`, in dry-run mode unless `for_real`, with strict field validation.
async fn apply(
    client: &Client,
    discovery: &Discovery,
    document: &Value,
    for_real: bool,
) -> Result<DynamicObject, String> {
    let (group, version) = match document["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((group, version)) => (group, version),
        None => ("", document["apiVersion"].as_str().unwrap_or_default()),
    };
    let kind = document["kind"].as_str().unwrap_or_default();
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = discovery
        .resolve_gvk(&gvk)
        .ok_or_else(|| format!("{gvk:?} is not served"))?;
    let name = document["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match (
        capabilities.scope,
        document["metadata"]["namespace"].as_str(),
    ) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
        (scope, namespace) => return Err(format!("{kind} {name}: {scope:?} in {namespace:?}")),
    };
    let mut params = PatchParams::apply(FIELD_MANAGER).validation_strict();
    if !for_real {
        params = params.dry_run();
    }
    api.patch(name, &params, &Patch::Apply(document))
        .await
        .map_err(|e| format!("{kind} {name}: {e}"))
}

/// Discovery once every kind of `documents` is served (a new CRD is served a moment after it is created).
async fn discovery_serving(client: &Client, documents: &[Value]) -> Discovery {
    let polling = Polling::within(WAIT).every(Duration::from_millis(200));
    kubeplex_testenv::eventually("the new CRDs served", polling, async || {
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| e.to_string())?;
        for document in documents {
            let crd = &document["spec"];
            let gvk = kube::api::GroupVersionKind::gvk(
                crd["group"].as_str().unwrap(),
                crd["versions"][0]["name"].as_str().unwrap(),
                crd["names"]["kind"].as_str().unwrap(),
            );
            if discovery.resolve_gvk(&gvk).is_none() {
                return Err(format!("{gvk:?} not served yet"));
            }
        }
        Ok::<_, String>(discovery)
    })
    .await
}

async fn create_namespaces(client: &Client, names: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let namespace =
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } });
        namespaces
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&namespace),
            )
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
    }
}

/// Dry-runs every document but the CRD; the rejections.
async fn dry_run_all(
    client: &Client,
    discovery: &Discovery,
    what: &str,
    documents: &[Document],
) -> Vec<String> {
    let mut rejected = Vec::new();
    for document in documents
        .iter()
        .filter(|d| d.kind() != "CustomResourceDefinition")
    {
        match apply(client, discovery, &document.value, false).await {
            Ok(object) => assert_eq!(object.name_any(), document.name()),
            Err(reason) => {
                rejected.push(format!("{what}: {} rejected: {reason}", document.template))
            }
        }
    }
    rejected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_passes_server_side_dry_run() {
    // The suite's clusters: the chart's CRDs and Namespaces are applied for real, the rest a dry run.
    let env = crate::support::shared().await;
    let client = env.client("control").await.unwrap();
    create_namespaces(&client, &[NAMESPACE, "crds", "apps", "leases", "members"]).await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let defaults = template(CONTROL_CHART, &[]);
    let crd = defaults
        .iter()
        .find(|d| d.kind() == "CustomResourceDefinition")
        .expect("the chart installs its CRD by default");
    let crds = [
        crd.value.clone(),
        monitoring_crd("ServiceMonitor", "servicemonitors"),
        monitoring_crd("PrometheusRule", "prometheusrules"),
    ];
    let _cluster_wide = crate::support::CLUSTER_WIDE.lock().await;
    for crd in &crds {
        apply(&client, &discovery, crd, true)
            .await
            .unwrap_or_else(|e| panic!("installing a CRD: {e}"));
    }
    let discovery = discovery_serving(&client, &crds).await;

    let mut rejected = Vec::new();
    for (mode, values) in MODES {
        let documents = template(CONTROL_CHART, values);
        rejected.extend(dry_run_all(&client, &discovery, mode, &documents).await);
    }

    // The child chart: its Namespaces for real (the Roles' dry-run needs them), then the rest.
    let child = env.client("cluster-a").await.unwrap();
    let documents = template(CHILD_CHART, &[]);
    let mut namespaces = vec![NAMESPACE];
    namespaces.extend(
        documents
            .iter()
            .filter(|d| d.kind() == "Namespace")
            .map(Document::name),
    );
    create_namespaces(&child, &namespaces).await;
    let child_discovery = Discovery::new(child.clone()).run().await.unwrap();
    rejected.extend(dry_run_all(&child, &child_discovery, "child chart", &documents).await);
    assert!(
        rejected.is_empty(),
        "rendered documents rejected:\n{}",
        rejected.join("\n")
    );

    // The check has teeth: a misspelled field and a misspelled rule are refused.
    let mut broken = defaults
        .iter()
        .find(|d| d.kind() == "Deployment")
        .unwrap()
        .value
        .clone();
    broken["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = json!({});
    let mut role = defaults
        .iter()
        .find(|d| d.kind() == "Role")
        .unwrap()
        .value
        .clone();
    role["rules"][0]["apiGroup"] = json!("demo.kubeplex.dev");
    for mistake in [broken, role] {
        assert!(
            apply(&client, &discovery, &mistake, false).await.is_err(),
            "{} with a misspelled field was accepted",
            mistake["kind"]
        );
    }
}
