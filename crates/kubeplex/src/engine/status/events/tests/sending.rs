//! Sending: a burst of events is sent a few at a time, every one of them; which recorders are kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;

use super::super::{EVENTS_AT_ONCE, EventPublisher, Note};

/// The parent the events are about.
fn parent() -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some("crds".into()),
        name: Some("parent".into()),
        uid: Some("uid-parent".into()),
        ..ObjectReference::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_events_is_sent_a_few_at_a_time_and_every_one_is_sent() {
    let (now, most, posted) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (in_flight, peak, count) = (now.clone(), most.clone(), posted.clone());
    let client = crate::testing::fake_api::answered_by(move |seen| {
        let (in_flight, peak, count) = (in_flight.clone(), peak.clone(), count.clone());
        async move {
            if seen.method == "POST" {
                count.fetch_add(1, Ordering::SeqCst);
            }
            let at = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(at, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            (201, serde_json::json!({}))
        }
    });
    let publisher = EventPublisher::new("test-controller");
    let parent = parent();
    // An event about each of 40 members, as a member change gives a parent.
    let burst = (0..40).map(|i| {
        let note = Note::normal("MemberJoined", "Apply", format!("member-{i} joined"));
        publisher.publish(
            "control",
            client.clone(),
            &parent,
            note.about(format!("member-{i}")),
        )
    });
    let sent =
        tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(burst)).await;
    assert!(sent.is_ok(), "every event is sent within a minute");
    assert_eq!(posted.load(Ordering::SeqCst), 40, "none is dropped");
    assert_eq!(most.load(Ordering::SeqCst), EVENTS_AT_ONCE);

    // Each member's events are a series of their own, until the member is gone.
    assert!(publisher.keeps("control", Some("member-3")));
    publisher.forget("member-3");
    assert!(!publisher.keeps("control", Some("member-3")));
    assert!(publisher.keeps("control", Some("member-4")));
    // An event of its own is sent, and leaves no recorder behind.
    let created = Note::normal(
        "ChildCreated",
        "Apply",
        "created in member-4: ns/web".into(),
    );
    publisher
        .publish("control", client.clone(), &parent, created.alone())
        .await;
    assert_eq!(posted.load(Ordering::SeqCst), 41);
    assert!(!publisher.keeps("control", None));
}

#[tokio::test]
async fn a_repeat_counts_up_its_event_and_new_words_about_the_same_cluster_are_a_new_event() {
    let methods = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen_methods = methods.clone();
    let client = crate::testing::fake_api::answered_by(move |seen| {
        seen_methods.lock().push(seen.method.clone());
        async move { (201, serde_json::json!({})) }
    });
    let publisher = EventPublisher::new("test-controller");
    let parent = parent();
    let degraded = |why: &str| {
        let text = format!("cluster-a: child ns/web is Degraded: {why}");
        Note::warning("ChildDegraded", "Health", text).about("cluster-a")
    };
    for why in ["unschedulable", "unschedulable", "CrashLoopBackOff"] {
        (publisher.publish("control", client.clone(), &parent, degraded(why))).await;
    }
    // The repeat is a patch of the first Event's series; the new cause an Event of its own, not a
    // count on the first one that would still read "unschedulable".
    assert_eq!(*methods.lock(), ["POST", "PATCH", "POST"]);
}
