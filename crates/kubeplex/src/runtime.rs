//! What every controller of a manager shares: the client pool, the watches, and the health state.

use std::sync::Arc;

use crate::health::Health;
use crate::pool::ClientPool;
use crate::watches::WatchRegistry;

/// The shared parts of a running manager.
pub(crate) struct Runtime {
    pub(crate) pool: ClientPool,
    pub(crate) watches: WatchRegistry,
    pub(crate) health: Arc<Health>,
}
