//! One controller at work: its engine, the loop that feeds its executor, reconcile, children (apply order,
//! apply, prune, changes), status writes, finalization, the orphan sweep, Events, and the primary, member and
//! shard watches. A test engine (`test_engine`) serves the unit tests here.

mod children;
mod controller_loop;
mod deletions_seen;
mod engine;
mod finalize;
mod intake;
mod orphans;
mod reconcile;
mod status;
#[cfg(test)]
mod test_engine;

pub(crate) use controller_loop::start as start_controller;
pub use engine::CONTEXT_TIMEOUT;
