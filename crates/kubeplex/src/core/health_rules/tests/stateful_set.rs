//! The StatefulSet rule under its update strategies: a rollout held at a partition on purpose is
//! suspended there, and `OnDelete` updates nobody by itself.

use serde_json::json;

use super::{child, table};
use crate::core::child_health::Health::{Healthy, Progressing, Suspended};

#[test]
fn a_stateful_set_is_updated_as_far_as_its_update_strategy_goes() {
    let status = |updated: i64| json!({ "observedGeneration": 1, "readyReplicas": 4, "updatedReplicas": updated });
    let strategy =
        |strategy: serde_json::Value| json!({ "replicas": 4, "updateStrategy": strategy });
    let partitioned =
        strategy(json!({ "type": "RollingUpdate", "rollingUpdate": { "partition": 3 } }));
    table(
        crate::core::health_rules::stateful_set,
        &[
            (
                "held at a partition, the replicas above it updated",
                child(1, partitioned.clone(), status(1)),
                Suspended,
                "4/4 replicas ready; held at partition 3: 1 updated",
            ),
            (
                "held at a partition, not there yet",
                child(1, partitioned, status(0)),
                Progressing,
                "0/1 replicas updated",
            ),
            (
                "OnDelete, none updated",
                child(1, strategy(json!({ "type": "OnDelete" })), status(0)),
                Healthy,
                "4/4 replicas ready; OnDelete: 0 updated, the others when deleted",
            ),
            (
                "rolling, not all updated",
                child(1, strategy(json!({ "type": "RollingUpdate" })), status(3)),
                Progressing,
                "3/4 replicas updated",
            ),
        ],
    );
}
