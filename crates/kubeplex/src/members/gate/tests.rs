//! The member gate in paused time: what a close waits for, and for how long.

use tokio::time::Instant;

use super::*;

/// Closes `name`'s gate on a task of its own, at most a minute.
fn closing(gate: &Arc<MemberGate>, name: &'static str) -> tokio::task::JoinHandle<bool> {
    let gate = gate.clone();
    tokio::spawn(async move { gate.close(name, Duration::from_secs(60)).await })
}

fn names(entered: &[(String, SyncGuard)]) -> Vec<&str> {
    entered.iter().map(|(n, _)| n.as_str()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_leave_waits_for_the_syncs_under_way_and_no_new_one_enters() {
    let gate = Arc::new(MemberGate::default());
    let mut entered = gate.enter(vec!["m".into(), "n".into()]);
    let (_, in_m) = entered.remove(0);
    let closing = {
        let gate = gate.clone();
        tokio::spawn(async move { gate.close("m", Duration::from_secs(15)).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !closing.is_finished(),
        "the leave did not wait for the sync under way"
    );
    // Leaving: no new sync enters m; n is not affected.
    let later = gate.enter(vec!["m".into(), "n".into()]);
    assert_eq!(
        later.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["n"]
    );
    drop(in_m);
    assert!(closing.await.unwrap());
    assert!(gate.is_leaving("m"));
    gate.open("m");
    assert_eq!(gate.enter(vec!["m".into()]).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_sync_that_never_ends_holds_a_leave_back_only_until_its_limit() {
    let gate = Arc::new(MemberGate::default());
    let _stuck = gate.enter(vec!["m".into()]);
    let started = Instant::now();
    assert!(!gate.close("m", Duration::from_secs(15)).await);
    assert_eq!(started.elapsed(), Duration::from_secs(15));
}

#[tokio::test(start_paused = true)]
async fn a_close_waits_for_every_sync_of_its_member_not_only_the_first_to_end() {
    let gate = Arc::new(MemberGate::default());
    let mut first = gate.enter(vec!["m".into(), "n".into()]);
    let second = gate.enter(vec!["m".into()]);
    let started = Instant::now();
    let close = closing(&gate, "m");
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.remove(0);
    // Another member's last sync ends too: it wakes the close, which must go on waiting.
    drop(first);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !close.is_finished(),
        "the close ended with a sync of m under way"
    );
    drop(second);
    assert!(close.await.unwrap());
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_close_of_an_idle_member_ends_at_once_and_leaves_it_closed() {
    let gate = Arc::new(MemberGate::default());
    let _elsewhere = gate.enter(vec!["n".into()]);
    let started = Instant::now();
    assert!(gate.close("m", Duration::from_secs(60)).await);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(gate.is_leaving("m") && !gate.is_leaving("n"));
    assert_eq!(names(&gate.enter(vec!["m".into(), "n".into()])), ["n"]);
}

#[tokio::test(start_paused = true)]
async fn an_open_during_a_close_lets_syncs_in_again_and_the_close_still_waits_until_the_member_is_idle()
 {
    let gate = Arc::new(MemberGate::default());
    let before = gate.enter(vec!["m".into()]);
    let started = Instant::now();
    let close = closing(&gate, "m");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(gate.is_leaving("m"));
    gate.open("m");
    assert!(!gate.is_leaving("m"));
    let after = gate.enter(vec!["m".into()]);
    assert_eq!(names(&after), ["m"], "open, the gate lets syncs in");
    // The close does not end while a sync is under way in m, whichever side of the open it entered on,
    // and it does not close the gate again.
    drop(before);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!close.is_finished());
    drop(after);
    assert!(close.await.unwrap());
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert!(!gate.is_leaving("m"));
}
