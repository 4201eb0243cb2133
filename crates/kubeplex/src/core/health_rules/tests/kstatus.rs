//! kstatus' rule, and which rule each kind gets.

use serde_json::json;

use super::super::{builtin_rule, kstatus as rule};
use super::{child, condition, table};
use crate::core::child_health::Health;

#[test]
fn kstatus() {
    use Health::*;
    table(
        rule,
        &[
            (
                "no status: current",
                child(1, json!({}), json!(null)),
                Healthy,
                "current",
            ),
            (
                "an older generation",
                child(2, json!({}), json!({ "observedGeneration": 1 })),
                Progressing,
                "generation 2 not observed yet (observed 1)",
            ),
            (
                "ready",
                child(
                    2,
                    json!({}),
                    json!({ "observedGeneration": 2, "conditions": [condition("Ready", "True", "Done", "")] }),
                ),
                Healthy,
                "ready",
            ),
            (
                "not ready",
                child(
                    2,
                    json!({}),
                    json!({ "conditions": [condition("Ready", "False", "Waiting", "waiting for the database")] }),
                ),
                Progressing,
                "not ready: waiting for the database",
            ),
            (
                "reconciling",
                child(
                    2,
                    json!({}),
                    json!({ "conditions": [condition("Reconciling", "True", "Progressing", "")] }),
                ),
                Progressing,
                "reconciling: Progressing",
            ),
            (
                "stalled",
                child(
                    2,
                    json!({}),
                    json!({ "conditions": [condition("Ready", "False", "", ""), condition("Stalled", "True", "Failed", "image not found")] }),
                ),
                Degraded,
                "stalled: image not found",
            ),
        ],
    );
}

#[test]
fn each_well_known_kind_has_its_rule_and_others_kstatus() {
    let stalled = child(
        1,
        json!({}),
        json!({ "conditions": [condition("Stalled", "True", "X", "")] }),
    );
    assert_eq!(
        builtin_rule("example.com", "Database")(&stalled).health,
        Health::Degraded
    );
    assert_eq!(
        builtin_rule("", "ConfigMap")(&child(1, json!({}), json!(null))).health,
        Health::Healthy
    );
    assert_eq!(
        builtin_rule("apps", "Deployment")(&stalled).health,
        Health::Progressing,
        "the Deployment rule reads no Stalled"
    );
    let bound = child(1, json!({}), json!({ "phase": "Bound" }));
    assert_eq!(
        builtin_rule("", "PersistentVolumeClaim")(&bound).reason,
        "bound"
    );
}
