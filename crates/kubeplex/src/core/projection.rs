//! What a child cache keeps of each child to judge its health: its metadata, the status' scalar fields and
//! conditions, a Pod's container states, and the few spec fields the rules read (`replicas`, `type`, ...)
//! — not the whole object.

use kube::api::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The part of a child a cache keeps to judge its health: its metadata (without `managedFields`), the spec
/// fields the rules read ([`SPEC_FIELDS`]), and its status' scalar fields, its conditions (type, status,
/// reason and message) and its `loadBalancer`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// The child's metadata, without `managedFields`.
    pub metadata: ObjectMeta,
    /// The spec fields of [`SPEC_FIELDS`] the child has; `Null` when it has none.
    #[serde(default)]
    pub spec: Value,
    /// The status as projected; `Null` when the child has none.
    #[serde(default)]
    pub status: Value,
}

/// The spec fields a projection keeps: what the built-in rules read.
pub const SPEC_FIELDS: [&str; 8] = [
    "replicas",
    "type",
    "paused",
    "suspend",
    "completions",
    "parallelism",
    "restartPolicy",
    "updateStrategy",
];

/// A condition of a projected status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConditionView<'a> {
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// Its reason, empty when it has none.
    pub reason: &'a str,
    /// Its message, empty when it has none.
    pub message: &'a str,
}

impl ConditionView<'_> {
    /// Whether its status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// What it says: its message, else its reason, else (a condition that gives neither) `type=status`.
    pub fn words(&self, type_: &str) -> String {
        match (self.message.is_empty(), self.reason.is_empty()) {
            (false, _) => self.message.to_owned(),
            (true, false) => self.reason.to_owned(),
            (true, true) => format!("{type_}={}", self.status),
        }
    }
}

/// A Pod's container as its projected status has it: the reason it waits or ended, and its restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerView<'a> {
    /// The container's name.
    pub name: &'a str,
    /// Whether it passes its readiness probe.
    pub ready: bool,
    /// How often it was restarted.
    pub restart_count: i64,
    /// Why it waits (`CrashLoopBackOff`, `ImagePullBackOff`, …), empty when it does not.
    pub waiting: &'a str,
    /// Why it ended (`Error`, `Completed`, `OOMKilled`, …), empty when it runs or waits.
    pub terminated: &'a str,
}

impl Projection {
    /// The projection of an object's parts: `spec` and `status` as the API server sent them, cut down to
    /// what a projection keeps; `managedFields` dropped from `metadata`.
    pub fn new(mut metadata: ObjectMeta, spec: Option<Value>, status: Option<Value>) -> Self {
        metadata.managed_fields = None;
        Self {
            metadata,
            spec: spec.map_or(Value::Null, project_spec),
            status: status.map_or(Value::Null, project_status),
        }
    }

    /// The projection of a whole object, serialized (for a kind cached whole).
    pub(crate) fn of_value(object: Value) -> Self {
        let Value::Object(mut object) = object else {
            return Self::default();
        };
        let metadata = (object.remove("metadata"))
            .and_then(|m| serde_json::from_value(m).ok())
            .unwrap_or_default();
        Self::new(metadata, object.remove("spec"), object.remove("status"))
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.metadata.generation
    }

    /// `status.observedGeneration`.
    pub fn observed_generation(&self) -> Option<i64> {
        self.status_i64("observedGeneration")
    }

    /// A kept spec field.
    pub fn spec_field(&self, name: &str) -> Option<&Value> {
        self.spec.get(name)
    }

    /// A kept spec field that is an integer.
    pub fn spec_i64(&self, name: &str) -> Option<i64> {
        self.spec_field(name).and_then(Value::as_i64)
    }

    /// A kept status field.
    pub fn status_field(&self, name: &str) -> Option<&Value> {
        self.status.get(name)
    }

    /// A status field that is an integer.
    pub fn status_i64(&self, name: &str) -> Option<i64> {
        self.status_field(name).and_then(Value::as_i64)
    }

    /// A status field that is a string.
    pub fn status_str(&self, name: &str) -> Option<&str> {
        self.status_field(name).and_then(Value::as_str)
    }

    /// The status condition of this type, if any.
    pub fn condition(&self, type_: &str) -> Option<ConditionView<'_>> {
        let conditions = self.status_field("conditions")?.as_array()?;
        let found = conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
        let text = |key: &str| found.get(key).and_then(Value::as_str).unwrap_or_default();
        Some(ConditionView {
            status: text("status"),
            reason: text("reason"),
            message: text("message"),
        })
    }

    /// A Pod's containers (`init`: its init containers) as its projected status has them.
    pub fn containers(&self, init: bool) -> Vec<ContainerView<'_>> {
        let field = if init {
            "initContainerStatuses"
        } else {
            "containerStatuses"
        };
        let statuses = self.status_field(field).and_then(Value::as_array);
        (statuses.into_iter().flatten())
            .map(|c| {
                let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
                ContainerView {
                    name: text("name"),
                    ready: c.get("ready").and_then(Value::as_bool) == Some(true),
                    restart_count: c.get("restartCount").and_then(Value::as_i64).unwrap_or(0),
                    waiting: text("waiting"),
                    terminated: text("terminated"),
                }
            })
            .collect()
    }

    /// Whether the controller of the child has seen its latest spec: `false` when the status says it
    /// observed an older generation, `true` when it says nothing of it.
    pub fn generation_observed(&self) -> bool {
        match (self.generation(), self.observed_generation()) {
            (Some(generation), Some(observed)) => observed >= generation,
            _ => true,
        }
    }
}

/// The spec fields of [`SPEC_FIELDS`].
fn project_spec(spec: Value) -> Value {
    let Value::Object(spec) = spec else {
        return Value::Null;
    };
    let kept: Map<String, Value> = spec
        .into_iter()
        .filter(|(key, _)| SPEC_FIELDS.contains(&key.as_str()))
        .collect();
    if kept.is_empty() {
        Value::Null
    } else {
        Value::Object(kept)
    }
}

/// The status' scalar fields, its conditions (type, status, reason, message) and its `loadBalancer`.
fn project_status(status: Value) -> Value {
    let Value::Object(status) = status else {
        return Value::Null;
    };
    let kept: Map<String, Value> = status
        .into_iter()
        .filter_map(|(key, value)| match (key.as_str(), value) {
            ("conditions", Value::Array(conditions)) => {
                let conditions = conditions.into_iter().map(project_condition).collect();
                Some((key, Value::Array(conditions)))
            }
            ("loadBalancer", value) => Some((key, value)),
            ("containerStatuses" | "initContainerStatuses", Value::Array(containers)) => {
                let containers = containers.into_iter().map(project_container).collect();
                Some((key, Value::Array(containers)))
            }
            (_, value @ (Value::Bool(_) | Value::Number(_) | Value::String(_))) => {
                Some((key, value))
            }
            _ => None,
        })
        .collect();
    Value::Object(kept)
}

/// A container's status cut down to what the Pod rule reads: its name, readiness, restarts, and the
/// reason it waits or ended (not its image, IDs or times).
fn project_container(container: Value) -> Value {
    let reason = |state: &str| {
        let state = container.get("state").and_then(|s| s.get(state))?;
        Some(
            state
                .get("reason")
                .cloned()
                .unwrap_or(Value::String(String::new())),
        )
    };
    let mut kept = Map::new();
    for key in ["name", "ready", "restartCount"] {
        if let Some(value) = container.get(key) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(waiting) = reason("waiting") {
        kept.insert("waiting".into(), waiting);
    }
    if let Some(terminated) = reason("terminated") {
        kept.insert("terminated".into(), terminated);
    }
    Value::Object(kept)
}

fn project_condition(condition: Value) -> Value {
    let Value::Object(condition) = condition else {
        return Value::Null;
    };
    let kept: Map<String, Value> = condition
        .into_iter()
        .filter(|(key, _)| matches!(key.as_str(), "type" | "status" | "reason" | "message"))
        .collect();
    Value::Object(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projection_keeps_scalars_conditions_and_the_rules_spec_fields_only() {
        let object = serde_json::json!({
            "metadata": { "name": "web", "namespace": "a", "generation": 3,
                          "managedFields": [{ "manager": "x" }] },
            "spec": { "replicas": 3, "template": { "spec": { "containers": [] } } },
            "status": {
                "observedGeneration": 3, "availableReplicas": 1,
                "conditions": [{ "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                                 "message": "not enough", "lastUpdateTime": "2026-01-01T00:00:00Z" }],
                "collisionCount": 0, "nested": { "big": [1, 2, 3] },
            },
        });
        let projection = Projection::of_value(object);
        assert_eq!(projection.metadata.managed_fields, None);
        assert_eq!(projection.spec, serde_json::json!({ "replicas": 3 }));
        assert_eq!(projection.status.get("nested"), None);
        assert_eq!(projection.observed_generation(), Some(3));
        let available = projection.condition("Available").unwrap();
        assert_eq!(
            (available.status, available.reason, available.message),
            ("False", "MinimumReplicasUnavailable", "not enough")
        );
        assert_eq!(
            projection.status["conditions"][0].get("lastUpdateTime"),
            None
        );
        assert!(projection.generation_observed());
    }
}
