//! Which cluster each name reaches (its identity: the `kube-system` Namespace's UID), and the names that
//! are not written to because of it: a name that reaches the same cluster as a name before it, and a
//! context that reaches another cluster than it did.
//!
//! Names are ranked: the code's contexts first (in the order the manager gives, the parents' contexts
//! before the others), then members in the order they joined. Of several names for one cluster the first
//! is written to, the others are refused, unless duplicates are allowed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::client::{IdentityGate, IdentitySource};

/// What a cluster answered when asked who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Its identity.
    Known(String),
    /// It answered, but its identity cannot be read (403, no such Namespace): no check stands in the way.
    Unknowable(String),
    /// It did not answer (unreachable, timed out): asked again when it answers.
    NoAnswer(String),
    /// It answered with an error (credentials rejected, a server error): writes meet the same answer, so
    /// they need not wait; asked again when it answers a ping after failing one.
    Refused(String),
}

/// Where a name stands in the order of precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// One of the code's contexts, at this place in the manager's order.
    Context(usize),
    /// A member, by the order it joined in.
    Member(u64),
}

/// One name's entry.
struct Entry {
    rank: Rank,
    gate: Arc<IdentityGate>,
    /// What it was last found to be.
    identity: Option<String>,
    /// A context that once reached another cluster: refused until the process restarts.
    changed: Option<String>,
    /// Why it is refused now, as last told.
    refused: Option<String>,
}

/// Every name's identity and gate.
#[derive(Default)]
pub(crate) struct Identities {
    allow_duplicates: AtomicBool,
    /// Whether a cluster's ClusterProperty id, where it has one, names it.
    by_cluster_property: AtomicBool,
    members_joined: AtomicU64,
    entries: Mutex<BTreeMap<String, Entry>>,
}

/// A name whose refusal changed: `Some(why)` refused from now on, `None` written to again.
pub(crate) type Refusal = (String, Option<String>);

impl Identities {
    /// Lets several names reach one cluster (a bench or a test pointing contexts at one server on purpose).
    pub(crate) fn allow_duplicates(&self, allow: bool) {
        self.allow_duplicates.store(allow, Ordering::Release);
    }

    /// Where every cluster's identity is read from now on.
    pub(crate) fn read_from(&self, source: IdentitySource) {
        let by_property = source == IdentitySource::ClusterProperty;
        self.by_cluster_property
            .store(by_property, Ordering::Release);
    }

    /// Where a cluster's identity is read.
    pub(crate) fn source(&self) -> IdentitySource {
        match self.by_cluster_property.load(Ordering::Acquire) {
            true => IdentitySource::ClusterProperty,
            false => IdentitySource::KubeSystem,
        }
    }

    /// Declares context `name`, the `place`-th in precedence, whose writes pass `gate`: held from now on,
    /// until its identity is recorded. A context declared again (its credentials rebuilt) keeps the
    /// identity it had, so a change is seen.
    pub(crate) fn declare_context(&self, name: &str, place: usize, gate: Arc<IdentityGate>) {
        self.declare(name, Rank::Context(place), gate);
    }

    /// Declares member `name` (after every context, and after the members declared before it), whose
    /// writes pass `gate`: held from now on, until its identity is recorded.
    pub(crate) fn declare_member(&self, name: &str, gate: Arc<IdentityGate>) {
        let joined = self.members_joined.fetch_add(1, Ordering::AcqRel);
        self.declare(name, Rank::Member(joined), gate);
    }

    fn declare(&self, name: &str, rank: Rank, gate: Arc<IdentityGate>) {
        gate.hold();
        let mut entries = self.entries.lock();
        let entry = entries.entry(name.to_owned()).or_insert_with(|| Entry {
            rank,
            gate: gate.clone(),
            identity: None,
            changed: None,
            refused: None,
        });
        entry.gate = gate;
        if let Some(why) = &entry.changed {
            entry.gate.shut(why);
        }
    }

    /// The identity `name` was last found to have.
    pub(crate) fn of(&self, name: &str) -> Option<String> {
        self.entries
            .lock()
            .get(name)
            .and_then(|e| e.identity.clone())
    }

    /// Why `name` is not written to now, if it is not.
    pub(crate) fn refusal(&self, name: &str) -> Option<String> {
        self.entries
            .lock()
            .get(name)
            .and_then(|e| e.refused.clone())
    }

    /// Holds `name`'s writes while it is asked again (after an outage).
    pub(crate) fn hold(&self, name: &str) {
        if let Some(entry) = self.entries.lock().get(name)
            && entry.refused.is_none()
        {
            entry.gate.hold();
        }
    }

    /// Whether `name`'s writes wait for its identity now.
    pub(crate) fn is_held(&self, name: &str) -> bool {
        (self.entries.lock().get(name)).is_some_and(|e| e.gate.is_held())
    }

    /// Records what `name` answered; returns the names whose refusal changed (it, and the others that
    /// reach the same cluster).
    pub(crate) fn record(&self, name: &str, asked: Asked) -> Vec<Refusal> {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.get_mut(name) else {
            return Vec::new();
        };
        let identity = match asked {
            Asked::NoAnswer(_) => return Vec::new(),
            Asked::Refused(why) => {
                if entry.refused.is_none() {
                    entry.gate.pass();
                }
                tracing::debug!(cluster = %name, problem = %why, "cannot ask which cluster this is yet");
                return Vec::new();
            }
            Asked::Unknowable(why) => {
                if entry.refused.is_none() {
                    entry.gate.pass();
                }
                tracing::warn!(cluster = %name, problem = %why, "cannot tell which cluster this is: two names for one cluster are not detected for it");
                return Vec::new();
            }
            Asked::Known(identity) => identity,
        };
        let before = entry.identity.replace(identity.clone());
        let mut settled = Vec::new();
        match before {
            Some(was) if was != identity && matches!(entry.rank, Rank::Context(_)) => {
                let why = format!(
                    "now reaches another cluster (identity {identity}, was {was}): nothing is \
                     written to it until the operator restarts"
                );
                tracing::error!(cluster = %name, identity = %identity, was = %was, "the context now reaches another cluster: nothing is written to it until the operator restarts");
                entry.changed = Some(why);
                settled.extend(refreshed(&mut entries, &was, self.allowed()));
            }
            None => {
                tracing::info!(cluster = %name, identity = %identity, "cluster identified")
            }
            Some(_) => {}
        }
        settled.extend(refreshed(&mut entries, &identity, self.allowed()));
        settled
    }

    /// Forgets member `name` (it left): a name refused for reaching the same cluster may be written to now.
    pub(crate) fn forget(&self, name: &str) -> Vec<Refusal> {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.remove(name) else {
            return Vec::new();
        };
        match entry.identity {
            Some(identity) => refreshed(&mut entries, &identity, self.allowed()),
            None => Vec::new(),
        }
    }

    fn allowed(&self) -> bool {
        self.allow_duplicates.load(Ordering::Acquire)
    }
}

/// Opens or shuts the gates of every name that reaches cluster `identity`: the first in precedence is
/// written to, each other one refused naming it (unless `allow`); a context that changed stays refused.
/// Returns the names whose refusal changed.
fn refreshed(entries: &mut BTreeMap<String, Entry>, identity: &str, allow: bool) -> Vec<Refusal> {
    let mut names: Vec<(Rank, String)> = (entries.iter())
        .filter(|(_, e)| e.identity.as_deref() == Some(identity) && e.changed.is_none())
        .map(|(name, e)| (e.rank, name.clone()))
        .collect();
    names.sort();
    let first = names.first().map(|(_, name)| name.clone());
    let mut settled = Vec::new();
    let changed = (entries.iter_mut()).filter(|(_, e)| e.identity.as_deref() == Some(identity));
    for (name, entry) in changed {
        let refused = match (&entry.changed, &first) {
            (Some(why), _) => Some(why.clone()),
            (None, Some(first)) if first != name && !allow => Some(format!(
                "reaches the same cluster as {first} (identity {identity}): nothing is written \
                 to it; remove one of the two names, or allow it (Manager::allow_duplicate_clusters)"
            )),
            _ => None,
        };
        match &refused {
            Some(why) => entry.gate.shut(why),
            None => entry.gate.pass(),
        }
        if refused != entry.refused {
            if let (Some(_), None, Some(first)) = (&refused, &entry.changed, &first) {
                tracing::error!(cluster = %name, same_as = %first, identity = %identity, "two names reach one cluster: nothing is written to the later one");
            }
            entry.refused.clone_from(&refused);
            settled.push((name.clone(), refused));
        }
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Arc<IdentityGate> {
        Arc::new(IdentityGate::unasked())
    }

    #[test]
    fn a_declared_name_is_held_until_its_identity_is_known() {
        let identities = Identities::default();
        let a = gate();
        identities.declare_context("cluster-a", 0, a.clone());
        assert!(a.is_held());
        identities.record("cluster-a", Asked::NoAnswer("unreachable".into()));
        assert!(
            a.is_held(),
            "no answer: still held, asked again when it answers"
        );
        identities.record("cluster-a", Asked::Known("uid-a".into()));
        assert!(!a.is_held() && a.refusal().is_none());
        assert_eq!(identities.of("cluster-a").as_deref(), Some("uid-a"));
    }

    #[test]
    fn of_two_names_for_one_cluster_the_later_in_precedence_is_refused_whoever_answers_first() {
        let identities = Identities::default();
        let (a, b, member) = (gate(), gate(), gate());
        identities.declare_context("cluster-a", 0, a.clone());
        identities.declare_context("cluster-b", 1, b.clone());
        identities.declare_member("edge", member.clone());
        // The member and the later context answer first: a context goes before a member, and the first
        // context's answer takes precedence over both.
        identities.record("edge", Asked::Known("uid".into()));
        assert!(member.refusal().is_none(), "alone, for now");
        identities.record("cluster-b", Asked::Known("uid".into()));
        assert!(b.refusal().is_none());
        assert!(
            member
                .refusal()
                .unwrap()
                .contains("same cluster as cluster-b")
        );
        let settled = identities.record("cluster-a", Asked::Known("uid".into()));
        assert!(a.refusal().is_none());
        let why = b.refusal().unwrap();
        assert!(
            why.starts_with("reaches the same cluster as cluster-a"),
            "{why}"
        );
        assert!(member.refusal().unwrap().contains("as cluster-a"));
        assert!(
            settled
                .iter()
                .any(|(name, r)| name == "cluster-b" && r.is_some())
        );
        assert_eq!(identities.refusal("cluster-b").as_deref(), Some(&*why));

        // The first leaves: the next in precedence is written to.
        identities.forget("cluster-a");
        assert!(b.refusal().is_none());
        assert!(member.refusal().unwrap().contains("as cluster-b"));
    }

    #[test]
    fn allowed_duplicates_are_all_written_to() {
        let identities = Identities::default();
        identities.allow_duplicates(true);
        let (a, b) = (gate(), gate());
        identities.declare_context("cluster-a", 0, a.clone());
        identities.declare_context("cluster-b", 1, b.clone());
        identities.record("cluster-a", Asked::Known("uid".into()));
        identities.record("cluster-b", Asked::Known("uid".into()));
        assert!(a.refusal().is_none() && b.refusal().is_none());
        assert!(!a.is_held() && !b.is_held());
    }

    #[test]
    fn a_context_that_reaches_another_cluster_is_refused_until_restart() {
        let identities = Identities::default();
        let a = gate();
        identities.declare_context("cluster-a", 0, a.clone());
        identities.record("cluster-a", Asked::Known("uid-1".into()));
        identities.hold("cluster-a");
        identities.record("cluster-a", Asked::Known("uid-2".into()));
        let why = a.refusal().unwrap();
        assert!(why.contains("now reaches another cluster"), "{why}");
        // Back to the first cluster, or its credentials rebuilt: still refused.
        identities.record("cluster-a", Asked::Known("uid-1".into()));
        assert!(a.refusal().is_some());
        let rebuilt = gate();
        identities.declare_context("cluster-a", 0, rebuilt.clone());
        assert!(rebuilt.refusal().is_some());
    }

    #[test]
    fn an_identity_that_cannot_be_read_holds_nothing_back() {
        let identities = Identities::default();
        let a = gate();
        identities.declare_context("cluster-a", 0, a.clone());
        identities.record("cluster-a", Asked::Unknowable("forbidden (403)".into()));
        assert!(!a.is_held() && a.refusal().is_none());
        // Nor one that refuses the credentials: its writes are refused the same way, not held.
        let b = gate();
        identities.declare_context("cluster-b", 1, b.clone());
        identities.record("cluster-b", Asked::Refused("Unauthorized (401)".into()));
        assert!(!b.is_held() && b.refusal().is_none());
        assert_eq!(identities.of("cluster-b"), None);
    }
}
