//! Prometheus metrics: the families, the cheap handles hot paths hold, and what is read at scrape time.

mod blocked;
mod by_context;
mod children_health;
mod family;
mod handles;
mod leaving;
mod live;
mod members;
mod metrics;
mod webhooks;

pub(crate) use children_health::ChildrenByHealth;
pub(crate) use handles::{QueueMetrics, WatchMetrics, gauge_value};
pub(crate) use live::QueueGroups;
pub(crate) use metrics::Metrics;
pub(crate) use webhooks::WebhookMetrics;
