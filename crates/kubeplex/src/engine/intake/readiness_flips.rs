//! A cluster that stops answering, or answers again, re-queues every parent of a controller that works
//! there: each parent's status follows its clusters' readiness without an edit of anything.

use std::sync::Arc;

use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::controller::DynReconcile;
use crate::core::Context;
use crate::engine::engine::Engine;

/// Follows `flips` (the clusters whose readiness flipped) for as long as the controller runs. A flip of a
/// cluster the controller works in queues every parent, each once whatever else queued it; a lag, which
/// lost flips, does the same once.
pub(crate) async fn follow<R: DynReconcile>(engine: Arc<Engine<R>>, mut flips: Receiver<String>) {
    loop {
        match flips.recv().await {
            Ok(cluster) if works_in(&engine, &cluster) => {
                tracing::debug!(%cluster, "the cluster's readiness changed: every parent is reconciled");
                engine.queue_every_parent();
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => engine.queue_every_parent(),
            Err(RecvError::Closed) => return,
        }
    }
}

/// Whether the controller has primaries, children or watched kinds in `cluster`: one of its contexts, or a
/// member when it works in members.
fn works_in<R: DynReconcile>(engine: &Engine<R>, cluster: &str) -> bool {
    let plan = &engine.plan;
    plan.all_contexts().iter().any(|c| c.name() == cluster)
        || (plan.works_in_members() && engine.runtime.members.contains(cluster))
}
