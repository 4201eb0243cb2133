//! kubeplex: Kubernetes operators that reconcile across many clusters from one process.
#![deny(missing_docs)]

mod context;
mod contexts_macro;
mod controller;
mod cx;
mod error;
mod plan;

pub use context::{Context, ContextName, Fleet};
pub use controller::{Controller, DEFAULT_ERROR_REQUEUE, Reconcile};
pub use cx::Cx;
pub use error::{Error, Result};
pub use kube::runtime::controller::Action;
pub use plan::{Child, Plan};

/// The names most controllers need: `use kubeplex::prelude::*;`.
pub mod prelude {
    pub use crate::{Action, Context, Controller, Cx, Fleet, Reconcile};
}
