//! One controller at work: its engine, the loop that feeds its executor, reconcile, children (apply order,
//! apply, prune, changes), status writes, finalization, the orphan sweep, Events, and the primary, member and
//! shard watches. A test engine (`test_engine`) serves the unit tests here.

mod answered;
mod applied;
mod apply_order;
mod child_changes;
mod children;
mod children_health;
mod conflicts;
mod controller_loop;
mod engine;
mod events;
mod finalize;
mod member_watches;
mod orphans;
mod primaries;
mod recent_writes;
mod reconcile;
mod shard_watches;
mod sources;
mod status_write;
#[cfg(test)]
mod test_engine;

pub(crate) use controller_loop::start as start_controller;
pub use engine::CONTEXT_TIMEOUT;
