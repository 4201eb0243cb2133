//! Where the keys of the current term go: the key queue of this replica's term as leader (or shard
//! owner), swapped at each new term, and none between terms.

use educe::Educe;
use parking_lot::RwLock;

use crate::executor::{KeySender, QueueKey};

/// The current term's queue of keys `K`; `None` while this replica stands by.
#[derive(Educe)]
#[educe(Default)]
pub(crate) struct TermKeys<K: QueueKey>(RwLock<Option<KeySender<K>>>);

impl<K: QueueKey> TermKeys<K> {
    /// The current term's queue, if this replica leads.
    pub(crate) fn get(&self) -> Option<KeySender<K>> {
        self.0.read().clone()
    }

    /// A term begins (`Some`) or ends (`None`).
    pub(crate) fn set(&self, keys: Option<KeySender<K>>) {
        *self.0.write() = keys;
    }
}
