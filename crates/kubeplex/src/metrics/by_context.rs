//! The series each cluster has in the families that carry a `cluster` label, so that a member that leaves
//! takes every one of them along (a fleet that turns over would otherwise grow `/metrics` for ever).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;

use super::family::Family;
use crate::core::Shrink;

/// Removes one series from its family.
type Remove = Box<dyn Fn() + Send + Sync>;

/// Per cluster, how to remove each of its series.
#[derive(Clone, Default)]
pub(super) struct ContextSeries(Arc<Mutex<HashMap<String, Vec<Remove>>>>);

impl ContextSeries {
    /// Notes the series `labels` of `family` as `context`'s, unless it exists already; called before it is
    /// created.
    pub(super) fn track<S, M>(&self, context: &str, family: &Family<S, M>, labels: &S)
    where
        S: Clone + Hash + Eq + Send + Sync + 'static,
        M: Clone + Send + Sync + 'static,
    {
        if family.get(labels).is_some() {
            return;
        }
        let (family, labels) = (family.clone(), labels.clone());
        let remove: Remove = Box::new(move || {
            family.remove(&labels);
        });
        let mut all = self.0.lock();
        all.entry(context.to_owned()).or_default().push(remove);
    }

    /// Removes every series of `context`.
    pub(super) fn remove(&self, context: &str) {
        let removes = {
            let mut all = self.0.lock();
            let removes = all.remove(context);
            all.shrink_when_sparse();
            removes
        };
        for remove in removes.into_iter().flatten() {
            remove();
        }
    }
}
