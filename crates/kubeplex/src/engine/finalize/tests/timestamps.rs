//! How long ago a deletion was requested, from the server's whole-second timestamp.

use std::time::Duration;

use super::super::deleted_for;
use super::OURS;
use crate::engine::test_engine::parent;

#[test]
fn a_deletion_counts_from_a_second_after_its_whole_second_timestamp() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut deleted = parent(&[OURS]);
    assert_eq!(deleted_for(&deleted), Duration::ZERO);
    // Requested 2.5 s ago, the server wrote the whole second: 2 or 3 s before now, never more.
    let ago = k8s_openapi::jiff::SignedDuration::from_millis(2500);
    let requested = k8s_openapi::jiff::Timestamp::now() - ago;
    let written = requested.round(k8s_openapi::jiff::Unit::Second).unwrap();
    let written = if written > requested {
        written - k8s_openapi::jiff::SignedDuration::from_secs(1)
    } else {
        written
    };
    deleted.metadata.deletion_timestamp = Some(Time(written));
    let counted = deleted_for(&deleted);
    assert!(counted <= Duration::from_millis(2500), "{counted:?}");
    assert!(counted >= Duration::from_millis(1400), "{counted:?}");
}
