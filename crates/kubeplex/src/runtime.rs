//! What every controller of a manager shares: the client pool, the watches, the health state and the metrics.

use std::sync::Arc;

use tokio::sync::watch;

use crate::fence::Role;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pool::ClientPool;
use crate::watches::WatchRegistry;

/// The shared parts of a running manager.
pub(crate) struct Runtime {
    pub(crate) pool: ClientPool,
    pub(crate) watches: WatchRegistry,
    pub(crate) health: Arc<Health>,
    pub(crate) metrics: Metrics,
    /// Whether this replica leads: its controllers run only while it does.
    pub(crate) role: watch::Receiver<Role>,
}
