//! A child as its cache keeps it by default: its metadata and the small projection its health is judged
//! from, never its whole spec or status.
//!
//! `Projected<K>` is a kind of its own for the watch (kube lists and watches it as `K`, and it deserializes
//! only what it keeps): its watch key names `Projected<K>`, apart from `K`'s and `PartialObjectMeta<K>`'s,
//! so that two kinds, or a projected and a whole-object cache of one kind, never share a watch.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use kube::api::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::core::{Projection, written_by_its_controller};

/// A child of kind `K`, projected.
pub(crate) struct Projected<K> {
    pub(crate) projection: Arc<Projection>,
    /// Whether the controller its label names is among its field managers: all a projection keeps of its
    /// managedFields (what adopting it by name needs), read as it is cached.
    pub(crate) written: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Projected<K> {
    fn clone(&self) -> Self {
        Self {
            projection: Arc::clone(&self.projection),
            written: self.written,
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Projected<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projected")
            .field("name", &self.projection.metadata.name)
            .finish_non_exhaustive()
    }
}

/// The spec fields a projection keeps ([`crate::core::SPEC_FIELDS`]), read without building the rest of the
/// spec (a Deployment's pod template is skipped as it is parsed).
#[derive(Deserialize)]
struct SpecFields {
    replicas: Option<Value>,
    #[serde(rename = "type")]
    type_: Option<Value>,
    paused: Option<Value>,
    suspend: Option<Value>,
    completions: Option<Value>,
    parallelism: Option<Value>,
}

impl SpecFields {
    fn into_value(self) -> Value {
        let fields = [
            ("replicas", self.replicas),
            ("type", self.type_),
            ("paused", self.paused),
            ("suspend", self.suspend),
            ("completions", self.completions),
            ("parallelism", self.parallelism),
        ];
        let kept: Map<String, Value> = fields
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_owned(), value?)))
            .collect();
        Value::Object(kept)
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<SpecFields>,
    status: Option<Value>,
}

impl<'de, K> Deserialize<'de> for Projected<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        let spec = raw.spec.map(SpecFields::into_value);
        Ok(Self {
            written: written_by_its_controller(&raw.metadata),
            projection: Arc::new(Projection::new(raw.metadata, spec, raw.status)),
            kind: PhantomData,
        })
    }
}

impl<K> Serialize for Projected<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.projection.serialize(serializer)
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Projected<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.projection.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut Arc::make_mut(&mut self.projection).metadata
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;

    use super::*;

    #[test]
    fn a_whole_object_deserializes_to_its_projection() {
        let json = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": "a", "generation": 2,
                          "labels": { "kubeplex.dev/controller": "kubeplex" },
                          "managedFields": [{ "manager": "kubeplex" }] },
            "spec": { "replicas": 3, "template": { "metadata": {}, "spec": { "containers": [{ "name": "c" }] } } },
            "status": { "observedGeneration": 2, "availableReplicas": 3 },
        });
        let projected: Projected<Deployment> = serde_json::from_value(json).unwrap();
        assert_eq!(projected.meta().name.as_deref(), Some("web"));
        assert_eq!(projected.meta().managed_fields, None);
        assert!(
            projected.written,
            "its controller's field manager, remembered"
        );
        assert_eq!(
            projected.projection.spec,
            serde_json::json!({ "replicas": 3 })
        );
        assert_eq!(
            projected.projection.status_i64("availableReplicas"),
            Some(3)
        );
        assert_eq!(Projected::<Deployment>::plural(&()), "deployments");
        assert_ne!(
            std::any::TypeId::of::<Projected<Deployment>>(),
            std::any::TypeId::of::<Projected<k8s_openapi::api::apps::v1::StatefulSet>>()
        );
    }
}
