//! Conversion between a CRD's versions: the handler trait, and how it converts a review's objects.

use std::sync::Arc;

use kube::core::DynamicObject;

use super::outcome::Outcome;

/// Where every kind with a converter is converted (controller-runtime's path too): the CRD's
/// `spec.conversion.webhook.clientConfig` names it.
pub const CONVERSION_PATH: &str = "/convert";

/// Converts objects of one CRD between its versions. The API server sends objects of any served version
/// and the version it wants; objects already in it are passed through without a call.
pub trait Convert: Send + Sync + 'static {
    /// `object` in `api_version` (`group/version`), or why it cannot be. Its `apiVersion` is set to
    /// `api_version` afterwards, and its metadata taken from `object` but for labels and annotations (the
    /// API server allows no other change).
    fn convert(&self, object: DynamicObject, api_version: &str) -> Result<DynamicObject, String>;
}

/// A converter and the kind (group, kind) it converts.
#[derive(Clone)]
pub(crate) struct Converter {
    group: String,
    kind: String,
    convert: Arc<dyn Convert>,
}

pub(super) fn converter(group: String, kind: String, convert: Arc<dyn Convert>) -> Converter {
    Converter {
        group,
        kind,
        convert,
    }
}

/// Every object in `desired`, or why not (as [`Outcome::Denied`]: the converter refused;
/// [`Outcome::Invalid`]: the object is not one it converts).
pub(super) fn convert_all(
    converters: &[Converter],
    objects: Vec<serde_json::Value>,
    desired: &str,
) -> Result<Vec<serde_json::Value>, Outcome> {
    objects
        .into_iter()
        .map(|object| {
            let object: DynamicObject = serde_json::from_value(object).map_err(|e| {
                Outcome::Invalid(format!("an object is not a Kubernetes object: {e}"))
            })?;
            let types = object.types.clone().unwrap_or_default();
            if types.api_version == desired {
                return serde_json::to_value(&object).map_err(|e| Outcome::Invalid(e.to_string()));
            }
            let group = types
                .api_version
                .rsplit_once('/')
                .map_or("", |(group, _)| group);
            let converter = converters
                .iter()
                .find(|c| c.group == group && c.kind == types.kind)
                .ok_or_else(|| {
                    Outcome::Invalid(format!(
                        "no converter for kind {} of group {group}",
                        types.kind
                    ))
                })?;
            let metadata = object.metadata.clone();
            let mut converted = converter
                .convert
                .convert(object, desired)
                .map_err(Outcome::Denied)?;
            let (labels, annotations) = (
                converted.metadata.labels.take(),
                converted.metadata.annotations.take(),
            );
            converted.metadata = metadata;
            converted.metadata.labels = labels;
            converted.metadata.annotations = annotations;
            converted.types = Some(kube::core::TypeMeta {
                api_version: desired.to_owned(),
                kind: types.kind,
            });
            serde_json::to_value(&converted).map_err(|e| Outcome::Invalid(e.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct Replicas;

    impl Convert for Replicas {
        fn convert(
            &self,
            mut object: DynamicObject,
            api_version: &str,
        ) -> Result<DynamicObject, String> {
            let spec = &mut object.data["spec"];
            match api_version {
                "test.dev/v2" => *spec = json!({ "scale": { "replicas": spec["replicas"] } }),
                "test.dev/v1" => *spec = json!({ "replicas": spec["scale"]["replicas"] }),
                other => return Err(format!("no version {other}")),
            }
            // A converter may not change the name: it is put back.
            object.metadata.name = Some("renamed".into());
            Ok(object)
        }
    }

    fn converters() -> Vec<Converter> {
        vec![converter(
            "test.dev".into(),
            "Widget".into(),
            Arc::new(Replicas),
        )]
    }

    fn widget(version: &str, spec: serde_json::Value) -> serde_json::Value {
        json!({ "apiVersion": format!("test.dev/{version}"), "kind": "Widget",
            "metadata": { "name": "w", "uid": "1", "labels": { "a": "b" } }, "spec": spec })
    }

    #[test]
    fn objects_are_converted_their_metadata_kept_and_those_in_the_version_passed_through() {
        let v1 = widget("v1", json!({ "replicas": 3 }));
        let v2 = widget("v2", json!({ "scale": { "replicas": 3 } }));
        let converted = convert_all(&converters(), vec![v1.clone(), v2.clone()], "test.dev/v2");
        assert_eq!(converted.unwrap(), [v2.clone(), v2.clone()]);
        let back = convert_all(&converters(), vec![v2], "test.dev/v1").unwrap();
        assert_eq!(back, [v1]);
    }

    #[test]
    fn a_kind_without_a_converter_and_a_refusal_fail_the_conversion() {
        let gadget = json!({ "apiVersion": "test.dev/v1", "kind": "Gadget", "metadata": {} });
        let failed = convert_all(&converters(), vec![gadget], "test.dev/v2").unwrap_err();
        assert!(
            matches!(&failed, Outcome::Invalid(why) if why.contains("no converter for kind Gadget"))
        );
        let v1 = widget("v1", json!({ "replicas": 3 }));
        let failed = convert_all(&converters(), vec![v1], "test.dev/v3").unwrap_err();
        assert!(matches!(&failed, Outcome::Denied(why) if why == "no version test.dev/v3"));
    }
}
