use super::*;
use crate::health::Health;
use crate::health::MemberPhase;

#[test]
fn a_member_shows_joining_ready_and_leaving_with_what_it_waits_for() {
    let health = Health::default();
    health.arm();
    health.declare("m", false);
    let phase = |health: &Health| health.report().contexts["m"].member.clone();
    assert_eq!(
        phase(&health),
        None,
        "no member phase for a context that is none"
    );

    health.member_phase("m", Some(Phase::Queued("a free slot".into())));
    let report = phase(&health).unwrap();
    assert_eq!(
        (report.phase, report.waiting_for.as_deref()),
        (MemberPhase::Joining, Some("a free slot"))
    );

    // Joined: joining until its client is connected and its watches have listed, then ready.
    health.member_phase("m", Some(Phase::Joining));
    let report = phase(&health).unwrap();
    assert_eq!(report.phase, MemberPhase::Joining);
    assert!(report.waiting_for.is_some());
    health.connected("m", None);
    let report = phase(&health).unwrap();
    assert_eq!(
        (report.phase, report.waiting_for),
        (MemberPhase::Ready, None)
    );

    let why = "its children to be deleted, tried again until the member answers and allows it: context m: unreachable"
        .to_owned();
    health.member_phase("m", Some(Phase::Leaving(Some(why.clone()))));
    let report = phase(&health).unwrap();
    assert_eq!(
        (report.phase, report.waiting_for),
        (MemberPhase::Leaving, Some(why))
    );
    let body = serde_json::to_value(health.report()).unwrap();
    assert_eq!(
        body["contexts"]["m"]["member"]["phase"], "leaving",
        "{body:#}"
    );

    health.member_phase("m", None);
    assert_eq!(phase(&health), None);
}
