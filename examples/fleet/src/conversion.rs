//! The conversion webhook: an `AppDeployment` read or written in `v1` or `v2`, whichever the API server
//! stores (`v1`). The status has one shape in both versions; only the spec is converted.

use kube::core::DynamicObject;
use kubeplex::webhook::Convert;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::app::v2;

/// Converts an `AppDeployment`'s spec between `v1` and `v2`, both ways without loss: every field of one
/// has its place in the other.
pub struct AppConversion;

impl Convert for AppConversion {
    fn convert(
        &self,
        mut object: DynamicObject,
        api_version: &str,
    ) -> Result<DynamicObject, String> {
        let from = object
            .types
            .as_ref()
            .map(|t| t.api_version.clone())
            .unwrap_or_default();
        let spec = object
            .data
            .get_mut("spec")
            .ok_or("the object has no spec")?;
        let converted = match (version(&from), version(api_version)) {
            (Some("v1"), Some("v2")) => {
                reshape::<crate::AppDeploymentSpec, v2::AppDeploymentSpec>(spec.take())
            }
            (Some("v2"), Some("v1")) => {
                reshape::<v2::AppDeploymentSpec, crate::AppDeploymentSpec>(spec.take())
            }
            _ => Err(format!(
                "cannot convert an AppDeployment from {from} to {api_version} (versions: v1, v2)"
            )),
        }?;
        *spec = converted;
        Ok(object)
    }
}

/// The version of `api_version` if it is one of this group's.
fn version(api_version: &str) -> Option<&str> {
    let (group, version) = api_version.split_once('/')?;
    (group == "demo.kubeplex.dev").then_some(version)
}

/// `spec` read as `A` and written as `B`.
fn reshape<A, B>(spec: serde_json::Value) -> Result<serde_json::Value, String>
where
    A: DeserializeOwned + Into<B>,
    B: Serialize,
{
    let spec: A = serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?;
    serde_json::to_value(spec.into()).map_err(|e| format!("spec: {e}"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::{Rollout, RolloutStrategy};

    fn object(version: &str, spec: Value) -> DynamicObject {
        serde_json::from_value(json!({ "apiVersion": format!("demo.kubeplex.dev/{version}"),
            "kind": "AppDeployment", "metadata": { "name": "web", "namespace": "crds" }, "spec": spec,
            "status": { "conditions": [{ "type": "Ready", "status": "True" }] } }))
        .unwrap()
    }

    fn convert(object: DynamicObject, to: &str) -> Result<DynamicObject, String> {
        let converted = AppConversion.convert(object, &format!("demo.kubeplex.dev/{to}"))?;
        // What the runtime does after the converter: the object is in the version asked for.
        let mut converted = converted;
        converted.types.as_mut().unwrap().api_version = format!("demo.kubeplex.dev/{to}");
        Ok(converted)
    }

    #[test]
    fn a_v1_spec_is_a_workload_and_a_placement_in_v2_and_the_status_is_kept() {
        let v1 = json!({ "image": "nginx:1.27", "replicas": 2, "namespaces": ["namespace-a"],
            "rollout": { "order": ["cluster-b"] } });
        let v2 = json!({ "workload": { "image": "nginx:1.27", "replicas": 2 },
            "placement": { "namespaces": ["namespace-a"], "rollout": { "order": ["cluster-b"] } } });
        let converted = convert(object("v1", v1.clone()), "v2").unwrap();
        assert_eq!(converted.data, object("v2", v2.clone()).data);
        let back = convert(converted, "v1").unwrap();
        assert_eq!(back.data, object("v1", v1).data);
        // Absent placement: every namespace, at once.
        let bare = convert(object("v2", json!({ "workload": v2["workload"] })), "v1").unwrap();
        assert_eq!(
            bare.data["spec"],
            json!({ "image": "nginx:1.27", "replicas": 2 })
        );
    }

    #[test]
    fn another_version_or_a_spec_of_another_shape_is_refused_saying_why() {
        let v1 = object("v1", json!({ "image": "nginx", "replicas": 1 }));
        let refused = convert(v1.clone(), "v3").unwrap_err();
        assert!(
            refused.contains("from demo.kubeplex.dev/v1 to demo.kubeplex.dev/v3"),
            "{refused}"
        );
        let refused = convert(object("v2", json!({ "image": "nginx" })), "v1").unwrap_err();
        assert!(
            refused.starts_with("spec: missing field `workload`"),
            "{refused}"
        );
        let mut bare = v1;
        bare.data.as_object_mut().unwrap().remove("spec");
        assert_eq!(convert(bare, "v2").unwrap_err(), "the object has no spec");
    }

    fn specs() -> impl Strategy<Value = crate::AppDeploymentSpec> {
        let names = prop::collection::vec("[a-z][a-z0-9-]{0,8}", 0..3);
        let rollout =
            prop::option::of(
                (any::<bool>(), names.clone()).prop_map(|(one, order)| Rollout {
                    strategy: one.then_some(RolloutStrategy::OneClusterAtATime),
                    order,
                }),
            );
        ("[a-z:.0-9]{1,12}", 0..5i32, names, rollout).prop_map(
            |(image, replicas, namespaces, rollout)| crate::AppDeploymentSpec {
                image,
                replicas,
                namespaces,
                rollout,
            },
        )
    }

    proptest! {
        /// Any `v1` object read as `v2` and back is what it was, as JSON, and so is any `v2` one: an absent
        /// rollout stays absent, an empty one empty.
        #[test]
        fn every_spec_survives_a_round_trip_through_the_other_version(spec in specs()) {
            let v1 = object("v1", serde_json::to_value(&spec).unwrap());
            let v2 = convert(v1.clone(), "v2").unwrap();
            prop_assert_eq!(&convert(v2.clone(), "v1").unwrap().data, &v1.data);
            prop_assert_eq!(&convert(convert(v2.clone(), "v1").unwrap(), "v2").unwrap().data, &v2.data);
        }
    }
}
