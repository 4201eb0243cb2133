//! One controller at work: its engine, the loop that feeds its executor, reconcile, finalization, the orphan
//! sweep; in wings, what feeds its queue (`intake`), one cluster's children (`children`) and what a parent is
//! told (`status`).

mod children;
mod controller_loop;
mod deletions_seen;
mod engine;
mod finalize;
mod intake;
mod orphans;
mod reconcile;
mod status;

pub(crate) use controller_loop::start as start_controller;
pub use engine::CONTEXT_TIMEOUT;
// The test engine (`crate::testing::engine`) builds one of these from outside the engine.
#[cfg(test)]
pub(crate) use {engine::Engine, status::events::EventPublisher};
