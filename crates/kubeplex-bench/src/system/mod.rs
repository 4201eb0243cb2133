//! What this process reads of itself and of others: live heap and RSS (the counting allocator every side
//! runs under), CPU time and connections.

mod alloc;
mod connections;
mod cpu;
mod server_metrics;

pub(crate) use alloc::{Counting, live_bytes, rss_anon_bytes, rss_bytes};
pub(crate) use connections::{
    connections_per_server, peak_connections_per_server, sample_connections,
};
pub(crate) use cpu::{own_seconds, processes_seconds};
pub(crate) use server_metrics::server_metrics;
