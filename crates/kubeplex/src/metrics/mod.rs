//! Prometheus metrics: the families, the cheap handles hot paths hold, and what is read at scrape time.

mod blocked;
mod handles;
mod live;
mod metrics;

pub(crate) use handles::{QueueMetrics, WatchMetrics};
pub(crate) use metrics::Metrics;
