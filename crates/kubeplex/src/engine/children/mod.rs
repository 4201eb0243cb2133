//! A parent's children: the fan-out over the clusters they live in, and in each cluster applied in the apply
//! order (claimed by name, own applies remembered), pruned or kept, removed when the parent goes; what changed,
//! conflicts, and how they are doing.

pub(super) mod answered;
pub(super) mod applied;
pub(super) mod apply_order;
pub(super) mod changes;
pub(super) mod claim;
pub(super) mod conflicts;
pub(super) mod deletion_lists;
pub(super) mod fan_out;
pub(super) mod health;
pub(super) mod parentage;
pub(super) mod removal;
pub(super) mod requests;
pub(super) mod sharing;
pub(super) mod sync;
pub(super) mod tally;
pub(super) mod unlink;
