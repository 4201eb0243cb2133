//! Which replica owns which shard: rendezvous (highest random weight) hashing over the live members, and the
//! shard a parent falls in. Pure functions, the same on every replica and every version of kubeplex.
//!
//! Why a hash of our own (FNV-1a, then a 64-bit finaliser) and not `std`'s or a fast-hash crate: every
//! replica must compute the same owner, also across a rolling upgrade to a build with another Rust or crate
//! version, and neither `std::hash::DefaultHasher` nor `ahash`/`foldhash` promise stable output.

/// What a shard is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShardBy {
    /// A hash of the parent's namespace and name, into this many shards: reconcile work scales out for
    /// parents that all live in one context.
    Parent(u16),
    /// The context the parent lives in: one shard per primary context.
    Context,
}

/// A stable 64-bit hash of `parts`, each ended by a zero byte so that `("ab", "c")` and `("a", "bc")` differ.
fn hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // FNV alone mixes the last bytes poorly; the splitmix64 finaliser spreads them over every bit.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The member that owns `shard`: the one with the highest score for it (ties by name, so every replica
/// agrees). Removing a member moves only the shards it owned; adding one takes only the shards it now
/// scores highest on.
pub(super) fn owner<'m>(shard: &str, members: &'m [String]) -> Option<&'m str> {
    members
        .iter()
        .map(|m| (hash(&[m, shard]), m))
        .max()
        .map(|(_, m)| m.as_str())
}

/// The shard (of `count`) of the parent `namespace/name`.
pub(super) fn of_parent(namespace: Option<&str>, name: &str, count: usize) -> usize {
    let h = hash(&[namespace.unwrap_or(""), name]);
    usize::try_from(h % u64::try_from(count.max(1)).unwrap_or(1)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn assignment(shards: usize, members: &[String]) -> BTreeMap<String, String> {
        (0..shards)
            .map(|s| {
                let shard = s.to_string();
                let owner = owner(&shard, members).unwrap().to_owned();
                (shard, owner)
            })
            .collect()
    }

    #[test]
    fn the_hash_is_pinned_so_replicas_of_different_builds_agree() {
        // Changing these values changes every replica's assignment: a rolling upgrade would then run two
        // builds that disagree on who owns what (fenced, so safe, but slow to settle).
        // The values are FNV-1a 64 of the bytes (each part ended by 0), then splitmix64's finaliser.
        assert_eq!(hash(&[]), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(hash(&["replica-x", "7"]), 0xe718_6166_4b13_b744);
        assert_ne!(hash(&["ab", "c"]), hash(&["a", "bc"]));
        assert_eq!(of_parent(Some("team-a"), "web", 16), 5);
    }

    #[test]
    fn no_member_owns_nothing_and_one_owns_everything() {
        assert_eq!(owner("3", &[]), None);
        let one = members(&["a"]);
        assert!(assignment(32, &one).values().all(|o| o == "a"));
    }

    #[test]
    fn every_member_gets_a_share() {
        let three = members(&["replica-x", "replica-y", "replica-z"]);
        let owned = assignment(300, &three);
        for m in &three {
            let count = owned.values().filter(|o| *o == m).count();
            assert!(
                (60..=140).contains(&count),
                "{m} owns {count} of 300 shards"
            );
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_shards() {
        let three = members(&["replica-x", "replica-y", "replica-z"]);
        let two = members(&["replica-x", "replica-z"]);
        let (before, after) = (assignment(64, &three), assignment(64, &two));
        let mut moved = 0;
        for (shard, owner) in &before {
            if owner == "replica-y" {
                moved += 1;
            } else {
                assert_eq!(
                    &after[shard], owner,
                    "shard {shard} moved though its owner stayed"
                );
            }
        }
        assert!(moved > 0, "replica-y owned nothing to move");
    }

    #[test]
    fn a_member_joining_takes_shards_only_for_itself() {
        let two = members(&["replica-x", "replica-z"]);
        let three = members(&["replica-z", "replica-x", "replica-w"]);
        let (before, after) = (assignment(64, &two), assignment(64, &three));
        for (shard, owner) in &after {
            if owner != "replica-w" {
                assert_eq!(
                    &before[shard], owner,
                    "shard {shard} moved between old members"
                );
            }
        }
        assert!(after.values().any(|o| o == "replica-w"));
    }

    #[test]
    fn parents_spread_over_the_shards() {
        let mut counts = [0usize; 8];
        for i in 0..800 {
            counts[of_parent(Some("apps"), &format!("app-{i}"), 8)] += 1;
        }
        assert!(counts.iter().all(|c| (60..=140).contains(c)), "{counts:?}");
        assert_eq!(of_parent(None, "x", 0), 0, "zero shards is one shard");
    }

    /// Generated fleets: 1 to 8 members with arbitrary names (duplicates dropped), and one more to join.
    fn fleet() -> impl proptest::strategy::Strategy<Value = (Vec<String>, String)> {
        use proptest::prelude::*;
        let name = "[a-z0-9-]{1,12}";
        (proptest::collection::btree_set(name, 1..=8), name).prop_map(|(members, joining)| {
            let members: Vec<String> = members.into_iter().collect();
            let joining = format!("{joining}-new");
            (members, joining)
        })
    }

    proptest::proptest! {
        #[test]
        fn every_shard_has_one_owner_whatever_order_the_members_are_listed_in(
            (members, _) in fleet(),
            rotate in 0usize..8,
        ) {
            let mut listed = members.clone();
            let len = listed.len();
            listed.rotate_left(rotate % len);
            listed.reverse();
            for shard in 0..64 {
                let shard = shard.to_string();
                let owner = owner(&shard, &members);
                proptest::prop_assert!(owner.is_some_and(|o| members.iter().any(|m| m == o)));
                proptest::prop_assert_eq!(owner, super::owner(&shard, &listed));
            }
        }

        #[test]
        fn a_join_or_a_leave_moves_only_the_shards_of_the_member_that_came_or_went(
            (members, joining) in fleet(),
        ) {
            let before = assignment(128, &members);
            let mut joined = members.clone();
            joined.push(joining.clone());
            let after = assignment(128, &joined);
            for (shard, owner) in &after {
                proptest::prop_assert!(owner == &before[shard] || owner == &joining, "shard {} moved between old members", shard);
            }
            // Leaving again gives back exactly what it took.
            proptest::prop_assert_eq!(assignment(128, &members), before);
            if members.len() > 1 {
                let leaving = &members[0];
                let rest = members[1..].to_vec();
                let left = assignment(128, &rest);
                for (shard, owner) in &left {
                    let was = &assignment(128, &members)[shard];
                    proptest::prop_assert!(was == owner || was == leaving, "shard {} moved from a member that stayed", shard);
                }
            }
        }

        #[test]
        fn shards_spread_evenly_over_the_members((members, _) in fleet()) {
            let shards = 1024;
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for owner in assignment(shards, &members).into_values() {
                *counts.entry(owner).or_default() += 1;
            }
            let fair = shards / members.len();
            // Half to one and a half times a fair share: more than five standard deviations either side.
            for member in &members {
                let got = counts.get(member).copied().unwrap_or(0);
                proptest::prop_assert!((fair / 2..=fair * 3 / 2).contains(&got), "{} owns {} of {} shards, fair is {}", member, got, shards, fair);
            }
        }
    }
}
