//! A controller as the manager holds it: its type erased behind what the manager asks of it.

use std::sync::Arc;

use tokio::sync::watch;

use crate::context::Context;
use crate::controller::Reconcile;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// A controller the manager runs, with its type erased.
pub(crate) trait Registration: Send {
    /// The controller's name.
    fn name(&self) -> String;
    /// Whether its plan can work.
    fn check(&self) -> Result<()>;
    /// The names of every context it needs.
    fn contexts(&self) -> Vec<String>;
    /// Opens its watches and returns its loop.
    fn start(
        self: Box<Self>,
        runtime: Arc<Runtime>,
        stop: watch::Receiver<bool>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<R: Reconcile> Registration for R {
    fn name(&self) -> String {
        R::plan().name().to_owned()
    }

    fn check(&self) -> Result<()> {
        let plan = R::plan();
        match plan.problem() {
            Some(reason) => Err(Error::InvalidPlan {
                controller: plan.name().to_owned(),
                reason,
            }),
            None => Ok(()),
        }
    }

    fn contexts(&self) -> Vec<String> {
        R::plan()
            .all_contexts()
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }

    fn start(
        self: Box<Self>,
        runtime: Arc<Runtime>,
        stop: watch::Receiver<bool>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(crate::controller_loop::start(
            *self,
            R::plan(),
            runtime,
            stop,
        ))
    }
}
