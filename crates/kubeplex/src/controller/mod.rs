//! What users implement and call: the `Controller` and `Reconcile` traits and the reconcile context `Cx`.

mod child_caches;
mod child_options;
mod controller;
mod cx;
mod desired_child;
mod erased;
#[cfg(test)]
pub(crate) mod test_controller;

pub(crate) use child_caches::ChildCaches;
pub use child_options::ChildOptions;
pub use controller::{Controller, Reconcile};
pub use cx::Cx;
pub(crate) use cx::OwnStatus;
pub(crate) use desired_child::{DesiredChild, DesiredChildren};
pub(crate) use erased::{DynReconcile, Erased};
