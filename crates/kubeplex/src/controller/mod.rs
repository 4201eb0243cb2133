//! What users implement and call: the `Controller` and `Reconcile` traits and the reconcile context `Cx`.

mod child_options;
mod controller;
mod cx;

#[cfg(test)]
pub(crate) mod test_controller;

pub use child_options::ChildOptions;
pub use controller::{Controller, Reconcile};
pub use cx::Cx;
pub(crate) use cx::{ChildCaches, DesiredChild, DesiredChildren};
