//! The waits of leaving members that each parent was warned of, so that each wait is told once.

use std::collections::HashMap;

use parking_lot::Mutex;

/// What each parent (by UID) was told of each leaving member's wait, by member.
///
/// Kept in memory, not read back from the status: the status persists a leave's wait only in the words
/// of its message. A restarted controller, or the new owner of a parent's shard, warns once more of a
/// leave that still waits.
#[derive(Default)]
pub(crate) struct ToldLeaves(Mutex<HashMap<String, HashMap<String, String>>>);

impl ToldLeaves {
    /// Records that the parent `uid` knows member `member`'s leave waits for `why` (`None`: it waits for
    /// nothing, and a later wait is news); whether that is news to it.
    pub(crate) fn tell(&self, member: &str, uid: &str, why: Option<&str>) -> bool {
        let mut told = self.0.lock();
        let Some(why) = why else {
            if let Some(parents) = told.get_mut(member) {
                parents.remove(uid);
            }
            return false;
        };
        let parents = told.entry(member.to_owned()).or_default();
        let news = parents.get(uid).is_none_or(|was| was != why);
        if news {
            parents.insert(uid.to_owned(), why.to_owned());
        }
        news
    }

    /// Forgets member `member`'s leave: it ended.
    pub(crate) fn forget(&self, member: &str) {
        self.0.lock().remove(member);
    }
}

#[cfg(test)]
mod tests {
    use super::ToldLeaves;

    #[test]
    fn a_wait_is_news_once_per_parent_until_it_changes_or_ends() {
        let told = ToldLeaves::default();
        assert!(told.tell("member-a", "uid-1", Some("403")));
        assert!(!told.tell("member-a", "uid-1", Some("403")));
        assert!(
            told.tell("member-a", "uid-2", Some("403")),
            "another parent"
        );
        assert!(
            told.tell("member-a", "uid-1", Some("timeout")),
            "another wait"
        );
        assert!(!told.tell("member-a", "uid-1", None));
        assert!(
            told.tell("member-a", "uid-1", Some("timeout")),
            "waits again"
        );
        told.forget("member-a");
        assert!(told.tell("member-a", "uid-2", Some("403")), "a new leave");
    }
}
