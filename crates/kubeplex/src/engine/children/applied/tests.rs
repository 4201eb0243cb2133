use serde_json::json;

use super::{Applied, SWEEP_FLOOR, digest};

#[test]
fn a_child_is_current_while_its_version_and_object_are_the_ones_applied() {
    let applied = Applied::default();
    let object = digest(&json!({"spec": {"replicas": 2}}));
    applied.record(Some("uid-1"), Some("41"), object, Vec::new);
    assert!(applied.is_current(Some("uid-1"), Some("41"), object));
    // Written since by anyone: its version moved.
    assert!(!applied.is_current(Some("uid-1"), Some("42"), object));
    // The reconcile wants something else now.
    let other = digest(&json!({"spec": {"replicas": 3}}));
    assert!(!applied.is_current(Some("uid-1"), Some("41"), other));
    // Another child (recreated under the same name: a new UID).
    assert!(!applied.is_current(Some("uid-2"), Some("41"), object));
}

#[test]
fn what_cannot_be_compared_is_never_current() {
    let applied = Applied::default();
    let object = digest(&json!({}));
    applied.record(Some("uid-1"), Some("not-a-number"), object, Vec::new);
    assert!(!applied.is_current(Some("uid-1"), Some("not-a-number"), object));
    assert_eq!(applied.len(), 0);
    applied.record(Some("uid-1"), Some("7"), object, Vec::new);
    assert!(!applied.is_current(None, Some("7"), object));
    assert!(!applied.is_current(Some("uid-1"), None, object));
}

#[test]
fn equal_objects_have_equal_digests_and_others_differ() {
    let a = json!({"metadata": {"name": "web", "labels": {"a": "1"}}, "spec": {"replicas": 2}});
    assert_eq!(digest(&a), digest(&a.clone()));
    let b = json!({"metadata": {"name": "web", "labels": {"a": "2"}}, "spec": {"replicas": 2}});
    assert_ne!(digest(&a), digest(&b));
}

#[test]
fn children_no_longer_cached_are_swept_once_the_map_has_grown() {
    let applied = Applied::default();
    let object = digest(&json!({}));
    let uids: Vec<String> = (0..=SWEEP_FLOOR).map(|i| format!("uid-{i}")).collect();
    // Only the last ten are still in the cache when the sweep comes.
    let cached: Vec<String> = uids[uids.len() - 10..].to_vec();
    for (i, uid) in uids.iter().enumerate() {
        let cached = cached.clone();
        applied.record(Some(uid), Some(&i.to_string()), object, move || cached);
    }
    assert_eq!(applied.len(), 10);
    let last = uids.len() - 1;
    assert!(applied.is_current(Some(&uids[last]), Some(&last.to_string()), object));
    assert!(!applied.is_current(Some(&uids[0]), Some("0"), object));
}
