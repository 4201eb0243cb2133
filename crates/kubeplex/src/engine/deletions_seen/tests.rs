//! How long a deletion has been seen: counted on tokio's clock from this process's first look, whatever
//! the server's `deletionTimestamp` and the local wall clock say.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::DeletionsSeen;
use crate::engine::test_engine::parent;

/// A finalizer that holds the parent while its deletion is under way.
const OURS: &str = "kubeplex.dev/test-controller";

/// The parent, deleted at `at` by the server's clock.
fn deleted_at(at: k8s_openapi::jiff::Timestamp) -> k8s_openapi::api::core::v1::ConfigMap {
    let mut deleted = parent(&[OURS]);
    deleted.metadata.deletion_timestamp = Some(Time(at));
    deleted
}

#[tokio::test(start_paused = true)]
async fn a_deletion_counts_from_the_first_look_on_tokios_clock() {
    let seen = DeletionsSeen::default();
    assert_eq!(seen.deleted_for(&parent(&[OURS])), Duration::ZERO);
    // A timestamp a day old (a local clock running ahead looks the same): no time has passed yet.
    let hour = k8s_openapi::jiff::SignedDuration::from_hours(24);
    let deleted = deleted_at(k8s_openapi::jiff::Timestamp::now() - hour);
    assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
    tokio::time::advance(Duration::from_secs(90)).await;
    assert_eq!(seen.deleted_for(&deleted), Duration::from_secs(90));
    // Forgotten once the parent is gone: a later look counts again.
    seen.forget(deleted.metadata.uid.as_deref().unwrap());
    assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_deletion_not_looked_at_for_long_is_forgotten_and_counted_again() {
    let seen = DeletionsSeen::default();
    let deleted = deleted_at(k8s_openapi::jiff::Timestamp::now());
    seen.deleted_for(&deleted);
    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(seen.deleted_for(&deleted), Duration::from_secs(300));
    tokio::time::advance(Duration::from_secs(601)).await;
    assert_eq!(seen.deleted_for(&deleted), Duration::ZERO);
}
