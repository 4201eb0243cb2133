//! One controller at work: its engine, the loop that feeds its executor, reconcile and its fan-out over the
//! child clusters, finalization, the orphan sweep; in wings, what feeds its queue (`intake`), one cluster's
//! children (`children`) and what a parent is told (`status`).

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
pub use engine::CLUSTER_TIMEOUT;
