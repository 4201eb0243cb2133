//! What a reconcile sees besides its object: where it came from and how to reach every context.

use std::time::Duration;

use crate::context::Context;
use crate::controller::DEFAULT_ERROR_REQUEUE;

/// The reconcile context: the context the object came from, and access to every declared context.
#[derive(Clone, Debug)]
pub struct Cx<C> {
    context: C,
    error_requeue: Duration,
}

impl<C: Context> Cx<C> {
    /// A reconcile context for an object from `context`.
    pub fn new(context: C) -> Self {
        Self {
            context,
            error_requeue: DEFAULT_ERROR_REQUEUE,
        }
    }

    /// The context the reconciled object came from.
    pub fn context(&self) -> C {
        self.context
    }

    /// How long the default error policy waits before a retry.
    pub fn error_requeue(&self) -> Duration {
        self.error_requeue
    }
}
