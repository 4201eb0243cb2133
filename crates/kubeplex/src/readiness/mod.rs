//! Whether each cluster answers: the state the probes report (`/startupz`, `/readyz`, `/livez`), the report
//! types, the pings, the probe server, the secure metrics server, and the TLS and connection handling the
//! webhook server shares with them (docs/probes.md).

mod cluster_entry;
mod connections;
mod identify;
mod identities;
mod outage;
mod phases;
mod ping;
mod probes;
mod readiness;
mod report;
mod review_budget;
mod review_cache;
mod scrape_review;
mod secure_metrics;
mod serving_certificate;
mod watch_readiness;

pub(crate) use connections::serve as serve_connections;
pub(crate) use identify::{ask_identity, identify};
pub(crate) use identities::Asked;
pub(crate) use phases::Phase;
pub use ping::{DEFAULT_PING_INTERVAL, PING_TIMEOUT};
pub(crate) use ping::{Pings, start as start_pings};
pub(crate) use probes::serve as serve_probes;
pub(crate) use readiness::Readiness;
pub use report::{
    ClusterReadiness, ClusterReport, LeadershipReport, MemberPhase, MemberReport, ReadinessReport,
    ShardingReport, WatchReport,
};
pub(crate) use secure_metrics::BoundSecureMetrics;
pub use secure_metrics::SecureMetrics;
pub(crate) use serving_certificate::{
    LaterCertificate, SELF_SIGNED_NAMES, later as later_certificate,
    reloading as reloading_certificate, self_signed_for,
};
pub(crate) use watch_readiness::{WatchEntry, WatchReadiness, is_expired};
