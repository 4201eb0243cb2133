//! The election's decisions as pure functions; its loop in [`running`], and under generated fault
//! schedules in [`schedules`].

mod running;
mod schedules;

use super::*;
use crate::core::ContextName;

fn election(identity: &str) -> LeaderElection {
    LeaderElection::new(ContextName::new("control"), "operators", "apps").with_identity(identity)
}

fn lease(holder: Option<&str>, renewed: i64, transitions: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("apps".into()),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

#[test]
fn no_lease_is_created_and_our_own_is_renewed() {
    let me = election("a");
    let t0 = Instant::now();
    assert_eq!(
        decide(None, &me, &mut Observed::default(), t0),
        Decision::Create
    );
    let Decision::Write(spec) = decide(
        Some(&lease(Some("a"), 100, 1)),
        &me,
        &mut Observed::default(),
        t0,
    ) else {
        panic!("our own lease is renewed");
    };
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(
        spec.lease_transitions,
        Some(1),
        "a renewal is no transition"
    );
    assert!(spec.renew_time.unwrap().0 > Timestamp::from_second(100).unwrap());
}

#[test]
fn anothers_lease_is_taken_only_after_a_whole_lease_duration_unchanged() {
    let me = election("b");
    let mut observed = Observed::default();
    let t0 = Instant::now();
    let held = lease(Some("a"), 100, 1);
    assert_eq!(
        decide(Some(&held), &me, &mut observed, t0),
        Decision::Wait("a".into())
    );
    // Its timestamps are long past (another host's clock): only what this replica saw counts.
    let almost = t0 + Duration::from_millis(14_900);
    assert_eq!(
        decide(Some(&held), &me, &mut observed, almost),
        Decision::Wait("a".into())
    );
    // Renewed meanwhile: the wait starts again.
    let renewed = lease(Some("a"), 110, 1);
    let t1 = t0 + Duration::from_secs(16);
    assert_eq!(
        decide(Some(&renewed), &me, &mut observed, t1),
        Decision::Wait("a".into())
    );
    assert_eq!(
        decide(
            Some(&renewed),
            &me,
            &mut observed,
            t1 + Duration::from_secs(14)
        ),
        Decision::Wait("a".into())
    );
    let Decision::Write(spec) = decide(
        Some(&renewed),
        &me,
        &mut observed,
        t1 + Duration::from_secs(15),
    ) else {
        panic!("unchanged for a lease duration: taken over");
    };
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(2));
    assert!(spec.acquire_time.is_some());
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let me = election("b");
    let released = lease(None, 100, 3);
    let Decision::Write(spec) = decide(
        Some(&released),
        &me,
        &mut Observed::default(),
        Instant::now(),
    ) else {
        panic!("a released lease is free");
    };
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(4));
}

#[test]
fn timings_that_cannot_fence_are_refused() {
    assert_eq!(election("a").problem(), None, "the defaults fence");
    let equal = election("a").renew_deadline(DEFAULT_LEASE_DURATION);
    assert!(
        equal
            .problem()
            .unwrap()
            .contains("must be shorter than the lease duration")
    );
    let slow = election("a").retry_period(DEFAULT_RENEW_DEADLINE);
    assert!(
        slow.problem()
            .unwrap()
            .contains("shorter than the renew deadline")
    );
    let fraction = election("a").lease_duration(Duration::from_millis(1500));
    assert!(
        fraction
            .problem()
            .unwrap()
            .contains("whole number of seconds")
    );
    assert!(
        election("")
            .problem()
            .unwrap()
            .contains("identity is empty")
    );
}

#[test]
fn the_default_identity_is_the_host_with_a_random_suffix() {
    let (a, b) = (default_identity(), default_identity());
    assert_ne!(a, b, "two replicas on one host differ");
    let (host, suffix) = a.rsplit_once('-').unwrap();
    assert!(!host.is_empty());
    assert_eq!(suffix.len(), 5, "{a}");
}
