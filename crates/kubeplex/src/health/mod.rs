//! Per-context health: the state the probes report, the health report types, the pings, the probe
//! server, and the secure metrics server.

mod connections;
mod health;
mod phases;
mod ping;
mod probes;
mod report;
mod review_budget;
mod review_cache;
mod scrape_review;
mod secure_metrics;
mod serving_certificate;
mod watch_health;

pub(crate) use health::Health;
pub(crate) use phases::Phase;
pub use ping::{DEFAULT_PING_INTERVAL, PING_TIMEOUT};
pub(crate) use ping::{Pings, start as start_pings};
pub(crate) use probes::serve as serve_probes;
pub use report::{
    ContextReport, ContextStatus, HealthReport, LeadershipReport, MemberPhase, MemberReport,
    ShardingReport, WatchReport,
};
pub(crate) use secure_metrics::BoundSecureMetrics;
pub use secure_metrics::SecureMetrics;
pub(crate) use watch_health::{WatchEntry, WatchHealth, is_expired};
