use super::*;
use crate::health::MemberPhase;

fn progress(health: &Arc<Health>) -> LeaveProgress {
    health.arm();
    health.declare("m", false);
    LeaveProgress::new("m", Slot::default(), None, health.clone())
}

fn shown(health: &Health) -> (MemberPhase, Option<String>) {
    let member = health.report().contexts["m"].member.clone().unwrap();
    (member.phase, member.waiting_for)
}

#[test]
fn a_standby_shows_that_the_leader_deletes_the_children_and_a_refusal_shows_its_reason() {
    let health = Arc::new(Health::default());
    let progress = progress(&health);

    progress.waits_for_the_leader("c");
    assert_eq!(progress.waiting_for().as_deref(), Some(STANDS_BY));
    let (phase, why) = shown(&health);
    assert_eq!(phase, MemberPhase::Leaving);
    assert!(why.unwrap().ends_with(STANDS_BY));

    // Leading, its own delete is refused: the refusal replaces the standby's reason.
    let refused = "deleting ConfigMap x failed: forbidden (403 Forbidden)".to_owned();
    progress.waits("c", refused.clone());
    assert_eq!(progress.waiting_for(), Some(refused.clone()));
    let (_, why) = shown(&health);
    assert!(why.unwrap().ends_with(&refused));

    progress.answered("c");
    assert_eq!(progress.waiting_for(), None);
    assert_eq!(shown(&health), (MemberPhase::Leaving, None));
    assert_eq!(progress.abandoned(), None);
}
