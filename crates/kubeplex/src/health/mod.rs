//! Per-context health: the state the probes report, the health report types, the pings, and the probe
//! server.

mod health;
mod ping;
mod probes;
mod report;

pub(crate) use health::{Health, WatchEntry, WatchHealth, is_expired};
pub use ping::DEFAULT_PING_INTERVAL;
pub(crate) use ping::{Pings, start as start_pings};
pub(crate) use probes::serve as serve_probes;
pub use report::{
    ContextReport, ContextStatus, HealthReport, LeadershipReport, ShardingReport, WatchReport,
};
