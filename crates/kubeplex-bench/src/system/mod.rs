//! What this process reads of itself and of others: live heap and RSS (the counting allocator every side
//! runs under) and CPU time.

mod alloc;
mod cpu;
mod server_metrics;

pub(crate) use alloc::{Counting, live_bytes, rss_anon_bytes, rss_bytes};
pub(crate) use cpu::{own_seconds, processes_seconds};
pub(crate) use server_metrics::server_metrics;
