//! The open watches of the kinds a controller neither reconciles nor owns (`watches(..)`), by cluster;
//! `sources.rs` subscribes them.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::core::{Cluster, Context};
use crate::watch::InputWatch;

/// One open watch of a watched kind, and the cluster it is in.
type Opened<C> = (Cluster<C>, Arc<dyn InputWatch>);

/// The open watches of the watched kinds.
pub(crate) struct Inputs<C> {
    opened: RwLock<Vec<Opened<C>>>,
}

impl<C> Default for Inputs<C> {
    fn default() -> Self {
        Self {
            opened: RwLock::default(),
        }
    }
}

impl<C: Context> Inputs<C> {
    /// Every open watch.
    pub(crate) fn all(&self) -> Vec<Arc<dyn InputWatch>> {
        let opened = self.opened.read();
        opened.iter().map(|(_, w)| w.clone()).collect()
    }

    /// Records `watches`, open in `cluster`.
    pub(crate) fn add(&self, cluster: &Cluster<C>, watches: &[Arc<dyn InputWatch>]) {
        let mut opened = self.opened.write();
        opened.extend(watches.iter().map(|w| (cluster.clone(), w.clone())));
    }

    /// Forgets the watches of member `name` (the runner closes them when it leaves).
    pub(crate) fn remove_member(&self, name: &str) {
        let mut opened = self.opened.write();
        opened.retain(|(cluster, _)| cluster.as_member().is_none_or(|m| m.name() != name));
    }
}
