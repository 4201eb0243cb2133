//! A mutating handler's changes laid over the object the API server sent.

use serde_json::Value;

/// Makes in `target` the changes that turn `before` into `after`: members added, changed or removed
/// (a `null` in `after` removes one, as an absent optional field serialises), nested objects merged
/// member by member, anything else replaced whole. What `before` and `after` agree on is left as `target`
/// has it, fields `before` does not know included.
pub(super) fn three_way(target: &mut Value, before: &Value, after: &Value) {
    if before == after {
        return;
    }
    let (Value::Object(target), Value::Object(before), Value::Object(after)) =
        (&mut *target, before, after)
    else {
        *target = after.clone();
        return;
    };
    for (key, changed) in after {
        let was = before.get(key).unwrap_or(&Value::Null);
        if was == changed {
            continue;
        }
        match target.get_mut(key) {
            _ if changed.is_null() => _ = target.remove(key),
            Some(nested) if nested.is_object() && was.is_object() && changed.is_object() => {
                three_way(nested, was, changed);
            }
            _ => _ = target.insert(key.clone(), changed.clone()),
        }
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        target.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_handler_s_changes_are_made_and_unknown_fields_are_kept() {
        let mut target = json!({
            "metadata": { "name": "a", "managedFields": [{ "manager": "kubectl" }] },
            "spec": { "image": "web", "unknown": { "kept": true }, "replicas": 1 },
        });
        // The handler's type knows neither managedFields nor `unknown`, and writes an unset field as null.
        let before = json!({
            "metadata": { "name": "a" },
            "spec": { "image": "web", "replicas": 1, "strategy": null, "old": "x" },
        });
        let after = json!({
            "metadata": { "name": "a", "labels": { "defaulted": "yes" } },
            "spec": { "image": "web", "replicas": 3, "strategy": "rolling" },
        });
        three_way(&mut target, &before, &after);
        assert_eq!(
            target,
            json!({
                "metadata": { "name": "a", "managedFields": [{ "manager": "kubectl" }],
                    "labels": { "defaulted": "yes" } },
                "spec": { "image": "web", "unknown": { "kept": true }, "replicas": 3,
                    "strategy": "rolling" },
            })
        );
    }

    #[test]
    fn a_field_set_to_null_is_removed() {
        let mut target = json!({ "spec": { "strategy": "rolling", "other": 1 } });
        let before = json!({ "spec": { "strategy": "rolling" } });
        let after = json!({ "spec": { "strategy": null } });
        three_way(&mut target, &before, &after);
        assert_eq!(target, json!({ "spec": { "other": 1 } }));
    }
}
