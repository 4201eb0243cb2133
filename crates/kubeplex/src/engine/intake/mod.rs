//! What feeds a controller's queue: its primary caches by place, the keys its watches and child caches
//! send into the current term's queue, the watches of kinds it neither reconciles nor owns, and the watches
//! of members and shards that come and go.

pub(super) mod inputs;
pub(super) mod member_watches;
pub(super) mod primaries;
pub(super) mod readiness_flips;
pub(super) mod shard_watches;
pub(super) mod sources;
pub(super) mod term_keys;
