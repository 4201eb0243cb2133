//! Turns: the waiting keys, grouped by where they come from, and which group's key runs next.
//!
//! Each group's keys run in their own order (due time, then the order they became due in); the groups
//! that have a key due take turns, one key each, so a flood of keys from one cluster delays a key from
//! another by at most one run. Without fairness every key is in one group, which is plain due order.
//! A group may also be capped: while that many of its keys run, its next key waits and the other groups
//! go on.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;

use tokio::time::Instant;

use crate::core::Shrink;

/// When a key is due, and its place among keys due at the same time.
pub(super) type Due = (Instant, u64);

/// What a queue's keys are grouped by for their turns.
pub(crate) trait QueueKey: Clone + Eq + Hash + Send + Sync + 'static {
    /// The group a key takes its turns in (for a controller, the cluster it came from).
    type Group: Clone + Eq + Hash + Send + Sync + 'static;

    /// This key's group.
    fn group(&self) -> Self::Group;

    /// The group's name in the queue's figures.
    fn group_name(group: &Self::Group) -> String;
}

/// How keys take their turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fairness {
    /// Groups take turns; else every key is in one group (due order).
    pub(crate) fair: bool,
    /// At most this many keys of one group run at once (only with `fair`).
    pub(crate) per_group: Option<usize>,
}

/// Where a group is: waiting for its turn, waiting for its first key to be due, or neither.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In `turns`: its first key was due when it was placed there.
    Turn,
    /// In `later` under its first key's due time.
    Later(Due),
    /// Nowhere: it has no waiting key, or as many running as its cap allows.
    Idle,
}

struct Group<K> {
    due: BTreeMap<Due, K>,
    running: usize,
    place: Place,
}

/// The waiting keys (not running) of a queue, by group.
pub(super) struct Turns<K: QueueKey> {
    dispatch: Fairness,
    /// `None` is the one group of a queue without fairness.
    groups: HashMap<Option<K::Group>, Group<K>>,
    /// The groups whose turn has come, in turn order.
    turns: VecDeque<Option<K::Group>>,
    /// The groups whose first key is not yet due (or was not when last looked at), by its due time.
    later: BTreeMap<Due, Option<K::Group>>,
}

impl<K: QueueKey> Turns<K> {
    pub(super) fn new(dispatch: Fairness) -> Self {
        Self {
            dispatch,
            groups: HashMap::new(),
            turns: VecDeque::new(),
            later: BTreeMap::new(),
        }
    }

    fn group_of(&self, key: &K) -> Option<K::Group> {
        self.dispatch.fair.then(|| key.group())
    }

    /// `key` waits, due at `due`.
    pub(super) fn insert(&mut self, due: Due, key: K) {
        let group = self.group_of(&key);
        self.groups
            .entry(group.clone())
            .or_insert_with(|| Group {
                due: BTreeMap::new(),
                running: 0,
                place: Place::Idle,
            })
            .due
            .insert(due, key);
        self.place(&group);
    }

    /// `key`, which waited due at `due`, leaves (it is due at another time now).
    pub(super) fn remove(&mut self, due: Due, key: &K) {
        let group = self.group_of(key);
        if let Some(entry) = self.groups.get_mut(&group) {
            entry.due.remove(&due);
            self.place(&group);
        }
    }

    /// A run of `key` ended: its group may run another.
    pub(super) fn ended(&mut self, key: &K) {
        let group = self.group_of(key);
        if let Some(entry) = self.groups.get_mut(&group) {
            entry.running = entry.running.saturating_sub(1);
            self.place(&group);
        }
    }

    /// The key whose turn it is among those due at `now`, counted as running; else when the next key is due
    /// (`None`: no key waits, or every waiting key's group is at its cap).
    pub(super) fn take(&mut self, now: Instant) -> Result<K, Option<Instant>> {
        while let Some(entry) = self.later.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let group = entry.remove();
            if let Some(waiting) = self.groups.get_mut(&group) {
                waiting.place = Place::Turn;
            }
            self.turns.push_back(group);
        }
        while let Some(group) = self.turns.pop_front() {
            let Some(waiting) = self.groups.get_mut(&group) else {
                continue;
            };
            waiting.place = Place::Idle;
            let first_due = waiting.due.first_key_value().map(|(due, _)| due.0);
            if first_due.is_none_or(|at| at > now) || self.capped(&group) {
                // Its first key moved later since (a debounced arrival), or it is at its cap.
                self.place(&group);
                continue;
            }
            let waiting = self.groups.get_mut(&group).expect("looked at");
            let (_, key) = waiting.due.pop_first().expect("looked at");
            waiting.running += 1;
            self.place(&group);
            return Ok(key);
        }
        Err(self.later.first_key_value().map(|(due, _)| due.0))
    }

    /// Whether `group` runs as many keys as its cap allows.
    fn capped(&self, group: &Option<K::Group>) -> bool {
        let running = self.groups.get(group).map_or(0, |g| g.running);
        group.is_some() && self.dispatch.per_group.is_some_and(|cap| running >= cap)
    }

    /// Puts `group` where its first key and its cap say, unless its turn has come already; forgets a group
    /// with nothing waiting or running.
    fn place(&mut self, group: &Option<K::Group>) {
        let capped = self.capped(group);
        let Some(entry) = self.groups.get_mut(group) else {
            return;
        };
        match entry.place {
            Place::Turn => return,
            Place::Later(at) => {
                self.later.remove(&at);
            }
            Place::Idle => {}
        }
        match entry.due.first_key_value() {
            Some((&first, _)) if !capped => {
                entry.place = Place::Later(first);
                self.later.insert(first, group.clone());
            }
            _ => {
                entry.place = Place::Idle;
                if entry.due.is_empty() && entry.running == 0 {
                    self.groups.remove(group);
                    self.groups.shrink_when_sparse();
                }
            }
        }
    }

    /// Every waiting key with when it is due.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Due, &K)> {
        self.groups.values().flat_map(|group| group.due.iter())
    }

    /// Whether nothing waits or runs.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.later.is_empty()
    }
}

/// The executor's tests use numbers as keys: a key's group is its millions (`1_000_005` is in group 1).
#[cfg(test)]
impl QueueKey for u32 {
    type Group = u32;

    fn group(&self) -> u32 {
        self / 1_000_000
    }

    fn group_name(group: &u32) -> String {
        format!("group-{group}")
    }
}
