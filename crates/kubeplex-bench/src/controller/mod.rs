//! The sections that weigh and time one controller per side, each measurement a `__child` process:
//! `latency`, `memory` (with `shared_watches`), `many_contexts` and `throughput`.

mod latency;
mod many_contexts;
mod memory;
mod throughput;

pub(crate) use latency::latency;
pub(crate) use many_contexts::run as many_contexts;
pub(crate) use memory::memory;
pub(crate) use throughput::throughput;
