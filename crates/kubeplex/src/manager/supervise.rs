//! A controller's loop, supervised: if it ends while the manager runs, `/livez` fails naming it.

use std::sync::Arc;

use tokio::sync::watch;

use crate::readiness::Readiness;

/// Runs a controller's loop as a task of its own; if it ends while the manager is running (a panic, or a
/// bug that ends the loop), that is logged and `/livez` fails naming the controller, instead of the
/// process running on half-dead.
pub(super) async fn supervise(
    controller: String,
    run: impl Future<Output = ()> + Send + 'static,
    stop: watch::Receiver<bool>,
    readiness: Arc<Readiness>,
) {
    let ended = tokio::spawn(run).await;
    // Stopped, or the manager dropped without a shutdown (a test that panicked): an end, not a failure.
    if *stop.borrow() || stop.has_changed().is_err() {
        return;
    }
    let reason = match ended {
        Ok(()) => "its loop ended unexpectedly".to_owned(),
        Err(error) if error.is_panic() => "its loop panicked".to_owned(),
        Err(error) => format!("its loop stopped: {error}"),
    };
    tracing::error!(%controller, %reason, "controller stopped; /livez now fails");
    readiness.controller_ended(&controller, reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_controller_loop_that_ends_or_panics_while_running_fails_liveness() {
        let readiness = Arc::new(Readiness::default());
        let (stop, stopped) = watch::channel(false);
        supervise("ended".into(), async {}, stopped.clone(), readiness.clone()).await;
        supervise(
            "panicked".into(),
            async { panic!("boom") },
            stopped.clone(),
            readiness.clone(),
        )
        .await;
        let dead = readiness.liveness_problems();
        assert_eq!(dead["ended"], "its loop ended unexpectedly");
        assert_eq!(dead["panicked"], "its loop panicked");

        // Ending because the manager stops is not a failure, nor because it was dropped.
        stop.send(true).unwrap();
        supervise("stopping".into(), async {}, stopped, readiness.clone()).await;
        assert!(!readiness.liveness_problems().contains_key("stopping"));
        let (dropped, orphaned) = watch::channel(false);
        drop(dropped);
        supervise("dropped".into(), async {}, orphaned, readiness.clone()).await;
        assert!(!readiness.liveness_problems().contains_key("dropped"));
    }
}
