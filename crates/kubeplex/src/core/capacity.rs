//! Room that follows the fleet down: a table grown for a thousand members keeps its capacity when they
//! leave, for the rest of the process, unless it is given back.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// Room a collection keeps at least: a small one that fills and empties does not reallocate each time.
const FLOOR: usize = 64;

/// A collection that gives back the room it no longer needs.
pub(crate) trait Shrink {
    /// Shrinks to twice the length once fewer than a quarter of the slots are used (never below
    /// [`FLOOR`]): the gap between the two keeps a collection whose length swings from shrinking and
    /// growing in turn.
    fn shrink_when_sparse(&mut self);
}

fn sparse(len: usize, capacity: usize) -> Option<usize> {
    (capacity > FLOOR && len.saturating_mul(4) < capacity).then(|| len.saturating_mul(2).max(FLOOR))
}

impl<K: Eq + Hash, V, S: BuildHasher> Shrink for HashMap<K, V, S> {
    fn shrink_when_sparse(&mut self) {
        if let Some(room) = sparse(self.len(), self.capacity()) {
            self.shrink_to(room);
        }
    }
}

impl<T> Shrink for Vec<T> {
    fn shrink_when_sparse(&mut self) {
        if let Some(room) = sparse(self.len(), self.capacity()) {
            self.shrink_to(room);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_emptied_after_a_thousand_entries_gives_its_room_back() {
        let mut map: HashMap<u32, [u8; 64]> = (0..1000).map(|i| (i, [0; 64])).collect();
        let grown = map.capacity();
        map.retain(|i, _| *i < 10);
        assert!(map.capacity() > grown / 2, "retain keeps the room");
        map.shrink_when_sparse();
        assert!(map.capacity() < grown / 4, "{} of {grown}", map.capacity());
        assert!(map.capacity() >= FLOOR);
        assert_eq!(map.len(), 10);
    }

    #[test]
    fn a_collection_in_use_or_small_keeps_its_room() {
        let mut half: Vec<u32> = Vec::with_capacity(1024);
        half.extend(0..512);
        half.shrink_when_sparse();
        assert_eq!(half.capacity(), 1024, "half full is not sparse");
        let mut small: Vec<u32> = Vec::with_capacity(FLOOR);
        small.shrink_when_sparse();
        assert_eq!(small.capacity(), FLOOR);
        // Shrunk to twice its length: it can double again before it must grow.
        let mut quarter: Vec<u32> = Vec::with_capacity(1024);
        quarter.extend(0..200);
        quarter.shrink_when_sparse();
        assert!(
            (400..1024).contains(&quarter.capacity()),
            "{}",
            quarter.capacity()
        );
    }
}
