//! `kubeplex_parent_deletion_blocked`: how many parents each (controller, cluster) holds back, kept from
//! the set of those parents so that a retry is not counted twice and a parent gone another way is dropped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::family::Family;
use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;

use super::handles::gauge_value;
use super::live::Labels;
use crate::core::Shrink;

/// The parents (`namespace/name`) each (controller, cluster) holds back.
type Held = HashMap<(String, String), HashSet<String>>;

/// The parents each (controller, cluster) holds back, and the gauge counting them.
#[derive(Clone, Default)]
pub(super) struct BlockedDeletions {
    parents: Arc<Mutex<Held>>,
    gauge: Family<Labels<2>, Gauge>,
}

impl BlockedDeletions {
    /// The gauge, to register.
    pub(crate) fn gauge(&self) -> Family<Labels<2>, Gauge> {
        self.gauge.clone()
    }

    /// Records whether the deletion of `parent` by `controller` waits for `context`.
    pub(crate) fn set(&self, controller: &str, context: &str, parent: &str, blocked: bool) {
        let key = (controller.to_owned(), context.to_owned());
        let mut all = self.parents.lock();
        let parents = all.entry(key).or_default();
        let changed = if blocked {
            parents.insert(parent.to_owned())
        } else {
            parents.remove(parent)
        };
        if changed {
            let count = gauge_value(parents.len());
            let labels = [
                ("controller", controller.to_owned()),
                ("cluster", context.to_owned()),
            ];
            self.gauge.get_or_create(&labels).set(count);
        }
    }

    /// `parent` of `controller` is gone: it holds back no cluster any more.
    pub(crate) fn parent_gone(&self, controller: &str, parent: &str) {
        let contexts: Vec<String> = {
            let all = self.parents.lock();
            all.iter()
                .filter(|((c, _), parents)| c == controller && parents.contains(parent))
                .map(|((_, context), _)| context.clone())
                .collect()
        };
        for context in contexts {
            self.set(controller, &context, parent, false);
        }
    }

    /// `context` left: it holds back no parent, and its series go.
    pub(crate) fn context_left(&self, context: &str) {
        let mut all = self.parents.lock();
        let gone: Vec<(String, String)> =
            all.keys().filter(|(_, c)| c == context).cloned().collect();
        for key in gone {
            all.remove(&key);
            let (controller, context) = key;
            self.gauge
                .remove(&[("controller", controller), ("cluster", context)]);
        }
        all.shrink_when_sparse();
    }
}
