//! High availability: leader election, sharding by rendezvous hashing, the shard Leases, and the role
//! (election) the controllers ask.

mod election;
mod leader;
mod rendezvous;
mod shard_leases;
mod shard_state;
mod sharding;

pub(crate) use election::Election;
pub use leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElection,
};
pub(crate) use rendezvous::ShardBy;
pub(crate) use shard_state::{FENCE_LAPSE_RETRY, ShardState};
pub use sharding::Sharding;
