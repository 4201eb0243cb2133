//! Generated schedules against a model: the queue's promises hold after every step of any sequence.
//!
//! The model keeps, per key, whether it runs and when its wait is due (by the rules the queue documents);
//! the queue runs under paused time. After each step: each key waits at most once and runs at most once,
//! nothing is handed out before it is due, past its group's cap, or out of its group's due order, a due key
//! is never left waiting while nothing else can run, groups take turns, and a dropped queue takes no key.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
enum Op {
    Send(u32),
    SendWithin(u32, u64),
    Take,
    /// Ends the run of the n-th running key (modulo their count), requeued that many ms from now.
    Finish(usize, Option<u64>),
    Advance(u64),
    Stop,
}

fn key() -> impl Strategy<Value = u32> {
    (0u32..3, 0u32..4).prop_map(|(group, n)| group * 1_000_000 + n)
}

fn millis() -> impl Strategy<Value = u64> {
    (0u64..6).prop_map(|n| n * 500)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => key().prop_map(Op::Send),
        1 => (key(), millis()).prop_map(|(k, d)| Op::SendWithin(k, d)),
        4 => Just(Op::Take),
        2 => (any::<usize>(), proptest::option::of(millis())).prop_map(|(n, r)| Op::Finish(n, r)),
        2 => millis().prop_map(Op::Advance),
        1 => (0u64..2).prop_map(|n| Op::Advance(n * 5_000)),
        1 => Just(Op::Stop),
    ]
}

fn fairness() -> impl Strategy<Value = Fairness> {
    (any::<bool>(), proptest::option::of(1usize..3))
        .prop_map(|(fair, per_group)| Fairness { fair, per_group })
}

/// One key in the model: whether it runs, and when its wait (if any) is due.
#[derive(Default)]
struct ModelKey {
    running: bool,
    due: Option<Instant>,
}

struct Model {
    fairness: Fairness,
    debounce: Duration,
    keys: BTreeMap<u32, ModelKey>,
    /// Per group: the step of its last take, and the step since which it could take (since its last take).
    last_take: BTreeMap<Option<u32>, usize>,
    ready_since: BTreeMap<Option<u32>, usize>,
}

impl Model {
    fn group(&self, key: u32) -> Option<u32> {
        self.fairness.fair.then(|| key.group())
    }

    fn capped(&self, group: Option<u32>) -> bool {
        let running = self
            .keys
            .iter()
            .filter(|(k, e)| e.running && self.group(**k) == group)
            .count();
        group.is_some() && self.fairness.per_group.is_some_and(|cap| running >= cap)
    }

    /// The keys that may run at `now`: waiting, due, not running, their group below its cap.
    fn ready(&self, now: Instant) -> BTreeSet<u32> {
        self.keys
            .iter()
            .filter(|(k, e)| {
                !e.running && e.due.is_some_and(|d| d <= now) && !self.capped(self.group(**k))
            })
            .map(|(k, _)| *k)
            .collect()
    }

    fn arrive(&mut self, key: u32, now: Instant, delay: Duration, within: bool) {
        let due = now + delay;
        let entry = self.keys.entry(key).or_default();
        entry.due = Some(match entry.due {
            None => due,
            // Within: only ever sooner. Debounced: an arrival decides while the wait is not yet due.
            Some(was) if within => was.min(due),
            Some(was) if was >= now => due,
            Some(was) => was,
        });
    }

    fn finish(&mut self, key: u32, requeue: Option<Instant>) {
        let debounce = self.debounce;
        let entry = self.keys.get_mut(&key).expect("finishes a running key");
        entry.running = false;
        if let Some(at) = requeue {
            entry.due = Some(match entry.due {
                None => at + debounce,
                // The requeue only brings a wait forward: a bounded send keeps its bound.
                Some(was) => was.min(at + debounce),
            });
        }
        if entry.due.is_none() {
            self.keys.remove(&key);
        }
    }

    /// Tracks since when each group could take a key, for the turns check.
    fn note_ready(&mut self, now: Instant, step: usize) {
        let groups: BTreeSet<Option<u32>> =
            self.ready(now).iter().map(|k| self.group(*k)).collect();
        self.ready_since.retain(|g, _| groups.contains(g));
        for group in groups {
            self.ready_since.entry(group).or_insert(step);
        }
    }

    /// The queue handed out `key` at `now` in `step`: it must be the model's to hand out.
    fn take(&mut self, key: u32, now: Instant, step: usize) -> Result<(), TestCaseError> {
        let ready = self.ready(now);
        prop_assert!(
            ready.contains(&key),
            "{} taken but not ready ({:?})",
            key,
            ready
        );
        let group = self.group(key);
        let due = self.keys[&key].due.expect("ready keys wait");
        let first = self
            .keys
            .iter()
            .filter(|(k, e)| !e.running && self.group(**k) == group)
            .filter_map(|(_, e)| e.due)
            .min()
            .expect("the key itself waits");
        prop_assert_eq!(due, first, "{} taken before its group's earlier key", key);
        // Groups take turns: another group that could take since before this group's last take has had its.
        if let Some(&last) = self.last_take.get(&group) {
            for (other, since) in &self.ready_since {
                prop_assert!(
                    *other == group || *since > last,
                    "group {:?} took twice while group {:?} waited its turn",
                    group,
                    other
                );
            }
        }
        self.last_take.insert(group, step);
        self.ready_since.remove(&group);
        let entry = self.keys.get_mut(&key).expect("ready keys exist");
        (entry.running, entry.due) = (true, None);
        Ok(())
    }
}

fn check(debounce: Duration, fairness: Fairness, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let (sender, queue) = key_queue::<u32>(debounce, fairness, QueueMetrics::default());
        let mut queue = Some(queue);
        let mut model = Model {
            fairness,
            debounce,
            keys: BTreeMap::new(),
            last_take: BTreeMap::new(),
            ready_since: BTreeMap::new(),
        };
        for (step, op) in ops.into_iter().enumerate() {
            let now = Instant::now();
            let Some(q) = &queue else {
                // Stopped: no source can add a key, so none is ever handed out again.
                prop_assert!(!sender.send(7) && !sender.is_open());
                continue;
            };
            match op {
                Op::Send(key) => {
                    prop_assert!(sender.send(key));
                    model.arrive(key, now, debounce, false);
                }
                Op::SendWithin(key, delay) => {
                    prop_assert!(sender.send_within(key, Duration::from_millis(delay)));
                    model.arrive(key, now, Duration::from_millis(delay), true);
                }
                Op::Take => {
                    let taken = futures::FutureExt::now_or_never(Box::pin(q.next()));
                    match taken {
                        Some(key) => model.take(key, now, step)?,
                        None => {
                            let ready = model.ready(now);
                            prop_assert!(ready.is_empty(), "{:?} due but not handed out", ready);
                        }
                    }
                }
                Op::Finish(n, requeue) => {
                    let running: Vec<u32> = model
                        .keys
                        .iter()
                        .filter(|(_, e)| e.running)
                        .map(|(k, _)| *k)
                        .collect();
                    if !running.is_empty() {
                        let key = running[n % running.len()];
                        let at = requeue.map(|r| now + Duration::from_millis(r));
                        q.finished(&key, at);
                        model.finish(key, at);
                    }
                }
                Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
                Op::Stop => queue = None,
            }
            // Each key waits once (dedupe), and exactly the model's waiting keys that do not run wait.
            if let Some(q) = &queue {
                let waiting = q.waiting();
                let unique: BTreeSet<u32> = waiting.iter().copied().collect();
                prop_assert_eq!(
                    unique.len(),
                    waiting.len(),
                    "a key waits twice: {:?}",
                    waiting
                );
                let expected: BTreeSet<u32> = model
                    .keys
                    .iter()
                    .filter(|(_, e)| !e.running && e.due.is_some())
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(unique, expected);
            }
            model.note_ready(Instant::now(), step);
        }
        // Every key still queued runs once it is due and the runs end: drain it all.
        if let Some(q) = queue {
            let running: Vec<u32> = model
                .keys
                .iter()
                .filter(|(_, e)| e.running)
                .map(|(k, _)| *k)
                .collect();
            for key in running {
                q.finished(&key, None);
                model.finish(key, None);
            }
            tokio::time::advance(Duration::from_secs(60)).await;
            let mut drained = BTreeSet::new();
            while let Some(key) = futures::FutureExt::now_or_never(Box::pin(q.next())) {
                prop_assert!(drained.insert(key), "{} handed out twice", key);
                q.finished(&key, None);
            }
            let left: BTreeSet<u32> = model.keys.keys().copied().collect();
            prop_assert_eq!(drained, left);
            prop_assert!(q.waiting().is_empty() && q.shared.state().turns.is_empty());
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn any_schedule_keeps_the_queues_promises(
        debounce in (0u64..3).prop_map(|n| n * 1_000),
        fairness in fairness(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        check(Duration::from_millis(debounce), fairness, ops)?;
    }
}
