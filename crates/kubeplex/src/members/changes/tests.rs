use parking_lot::Mutex;

use super::*;

/// What the runs did, in order: `"<member> <kind> <what>"`.
type Log = Arc<Mutex<Vec<String>>>;

/// A run that takes `join`/`leave` long (a leave of a member named `silent*` parks first), logging its
/// start and end.
fn runner(
    log: &Log,
    join: Duration,
    leave: Duration,
) -> impl FnMut(&str, Change<u32>, Slot) -> BoxFuture<'static, ()> + use<> {
    let log = log.clone();
    move |member, change, slot| {
        let (log, member) = (log.clone(), member.to_owned());
        Box::pin(async move {
            let what = match &change {
                Change::Join(version) => format!("join {version}"),
                Change::Unhealthy(reason) => format!("unhealthy {reason}"),
                Change::Leave(_) => "leave".to_owned(),
            };
            log.lock().push(format!("{member} {what} started"));
            match change {
                Change::Join(_) => tokio::time::sleep(join).await,
                Change::Unhealthy(_) => {}
                Change::Leave(done) => {
                    if member.starts_with("silent") {
                        slot.park();
                    }
                    tokio::time::sleep(leave).await;
                    for done in done {
                        let _ = done.send(LeaveOutcome::Done);
                    }
                }
            }
            log.lock().push(format!("{member} {what} ended"));
        })
    }
}

/// Runs the changes until none is left; the ended ones, in order.
async fn drain(
    changes: &mut MemberChanges<u32>,
    run: &mut impl FnMut(&str, Change<u32>, Slot) -> BoxFuture<'static, ()>,
) -> Vec<Ended> {
    let mut ended = Vec::new();
    loop {
        changes.start(&mut *run);
        if changes.at_work() == 0 && changes.waiting() == 0 && changes.running.is_empty() {
            return ended;
        }
        let next = tokio::time::timeout(Duration::from_secs(3600), changes.next()).await;
        ended.extend(next.expect("a change ends within the hour"));
    }
}

fn leave() -> (Change<u32>, oneshot::Receiver<LeaveOutcome>) {
    let (done, answer) = oneshot::channel();
    (Change::Leave(vec![done]), answer)
}

#[tokio::test(start_paused = true)]
async fn one_members_changes_run_in_order_and_others_beside_them() {
    let log = Log::default();
    let mut run = runner(&log, Duration::from_secs(1), Duration::from_secs(30));
    let mut changes = MemberChanges::new(16);
    let (leave_a, _) = leave();
    changes.push("a", Change::Join(1));
    changes.push("b", Change::Join(1));
    changes.start(&mut run);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // a's join has ended by then: its leave, then its join again, follow in order; b's credential change
    // does not wait for a's leave.
    changes.push("a", leave_a);
    changes.push("a", Change::Join(2));
    changes.push("b", Change::Join(2));
    let started = Instant::now();
    let ended = drain(&mut changes, &mut run).await;
    let order: Vec<(&str, &str)> = ended.iter().map(|e| (e.member.as_str(), e.kind)).collect();
    assert_eq!(
        order,
        [
            ("a", "join"),
            ("b", "join"),
            ("b", "join"),
            ("a", "leave"),
            ("a", "join")
        ]
    );
    assert!(ended.iter().all(|e| !e.cancelled), "{ended:?}");
    // a's 30 s leave and 1 s join; b's second join beside them.
    assert_eq!(started.elapsed(), Duration::from_secs(31));
    let log = log.lock();
    let at = |line: &str| log.iter().position(|l| l == line).unwrap();
    assert!(at("b join 2 ended") < at("a leave ended"), "{log:?}");
    assert!(at("a leave ended") < at("a join 2 started"), "{log:?}");
}

#[tokio::test(start_paused = true)]
async fn a_leave_cancels_its_members_join_at_work_and_replaces_those_waiting() {
    let log = Log::default();
    let mut run = runner(&log, Duration::from_secs(30), Duration::from_secs(1));
    let mut changes = MemberChanges::new(16);
    changes.push("a", Change::Join(1));
    changes.start(&mut run);
    tokio::time::advance(Duration::from_secs(1)).await;
    let (first, first_answer) = leave();
    let (second, second_answer) = leave();
    changes.push("a", first);
    changes.push("a", Change::Join(2));
    changes.push("a", Change::Unhealthy("bad".into()));
    changes.push("a", second);
    let started = Instant::now();
    let ended = drain(&mut changes, &mut run).await;
    let order: Vec<(&str, bool)> = ended.iter().map(|e| (e.kind, e.cancelled)).collect();
    assert_eq!(order, [("join", true), ("leave", false)]);
    // The join was not waited for: the leave took its own second only.
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    // One leave answered both.
    assert_eq!(first_answer.await, Ok(LeaveOutcome::Done));
    assert_eq!(second_answer.await, Ok(LeaveOutcome::Done));
    assert!(!log.lock().iter().any(|l| l.contains("join 2")));
}

#[tokio::test(start_paused = true)]
async fn a_newer_join_replaces_the_one_waiting_and_a_join_after_a_leave_waits_for_it() {
    let log = Log::default();
    let mut run = runner(&log, Duration::from_secs(1), Duration::from_secs(5));
    let mut changes = MemberChanges::new(16);
    let (leave_a, _) = leave();
    changes.push("a", leave_a);
    changes.push("a", Change::Join(1));
    changes.push("a", Change::Unhealthy("bad".into()));
    changes.push("a", Change::Join(2));
    drain(&mut changes, &mut run).await;
    let log = log.lock();
    let started: Vec<&String> = log.iter().filter(|l| l.ends_with("started")).collect();
    assert_eq!(started, ["a leave started", "a join 2 started"]);
    // The join started only once the leave had ended.
    assert_eq!(log[1], "a leave ended");
}

#[tokio::test(start_paused = true)]
async fn at_most_the_limit_are_at_work_and_a_parked_leave_frees_its_slot() {
    let log = Log::default();
    let mut run = runner(&log, Duration::from_secs(1), Duration::from_secs(600));
    let mut changes = MemberChanges::new(2);
    let (silent_1, _) = leave();
    let (silent_2, _) = leave();
    changes.push("silent-1", silent_1);
    changes.push("silent-2", silent_2);
    for member in 0..10 {
        changes.push(&format!("m{member}"), Change::Join(1));
    }
    changes.start(&mut run);
    assert_eq!(changes.running.len(), 2, "the limit is 2");
    // Both leaves park at once: the joins go on two at a time, without waiting for them.
    let started = Instant::now();
    loop {
        changes.start(&mut run);
        assert!(changes.at_work() <= 2);
        if changes.waiting() == 0 && changes.at_work() == 0 {
            break;
        }
        let next = tokio::time::timeout(Duration::from_secs(60), changes.next()).await;
        next.expect("a join ends or a leave parks within a minute");
    }
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "10 joins of 1 s, 2 at a time"
    );
    assert_eq!(
        changes.running.len(),
        2,
        "the parked leaves are still at work"
    );
    let overdue = changes.overdue(Duration::from_secs(4));
    let members: Vec<&str> = overdue.iter().map(|o| o.member.as_str()).collect();
    assert_eq!(members, ["silent-1", "silent-2"]);
    assert!(overdue.iter().all(|o| o.running && o.kind == "leave"));
}

#[tokio::test(start_paused = true)]
async fn a_thousand_members_are_not_run_one_by_one() {
    let log = Log::default();
    let mut run = runner(&log, Duration::from_secs(1), Duration::from_secs(1));
    let mut changes = MemberChanges::new(16);
    for member in 0..1000 {
        changes.push(&format!("m{member:04}"), Change::Join(1));
    }
    let started = Instant::now();
    let ended = drain(&mut changes, &mut run).await;
    assert_eq!(ended.len(), 1000);
    // 1000 joins of 1 s, 16 at a time: 63 s, where one by one would take 1000 s.
    assert_eq!(started.elapsed(), Duration::from_secs(63));
    // The oldest first.
    assert_eq!(ended[0].member, "m0000");
}
