//! Admission and conversion webhooks, served over TLS by every replica: typed handlers that see the whole
//! fleet's caches and readiness (docs/webhooks.md).

mod admission;
mod ca;
mod ca_bundle;
mod conversion;
mod fleet_view;
mod merge;
mod outcome;
mod route;
mod router;
mod server;
#[cfg(test)]
mod tests;
mod webhooks;

pub use admission::{Mutate, Validate, mutating_path, validating_path};
pub use ca_bundle::Registration;
pub use conversion::{CONVERSION_PATH, Convert};
pub use fleet_view::FleetView;
pub use kube::core::admission::{AdmissionRequest, Operation};
pub use outcome::FailurePolicy;
pub(crate) use server::BoundWebhooks;
pub use webhooks::{DEFAULT_HANDLER_TIMEOUT, Webhooks};
