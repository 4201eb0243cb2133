//! The environment itself, on real clusters, in one binary: each file a concern, run side by side — a shared
//! environment read and written through every context (`clusters`), attached to from another environment and
//! another process (`attach`), controller managers (`controller_manager`),
//! faults and cleanup on private environments (`faults`), repeated starts while other programs take ports
//! (`starts`), and the test deadline (`deadline`).

mod attach;
mod clusters;
mod controller_manager;
mod deadline;
mod faults;
mod starts;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ObjectMeta;

/// The group of the tests' kinds: one of their own, as the clusters may be attached to and hold other
/// programs' kinds.
pub const GROUP: &str = "testenv.kubeplex.dev";

/// An empty ConfigMap called `name`.
pub fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// A namespaced, schemaless CRD of `kind` in [`GROUP`], served at `plural`, with `short_names`.
pub fn crd(kind: &str, plural: &str, short_names: &[&str]) -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("{plural}.{GROUP}") },
        "spec": {
            "group": GROUP,
            "names": { "kind": kind, "plural": plural, "shortNames": short_names },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }
            }]
        }
    }))
    .unwrap()
}
