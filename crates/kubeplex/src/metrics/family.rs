//! A metric family whose table gives its room back: `prometheus-client`'s `Family` keeps the capacity of
//! its largest series count for ever (it has no way to shrink), so a fleet of a thousand members that
//! left would keep a thousand members' room in every family with a `cluster` label. This one encodes the
//! same way through `prometheus-client`'s encoder, and shrinks once sparse ([`Shrink`]).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::core::Shrink;

/// Series of metric `M` by label set `S`. A clone is the same family (its table is shared).
pub(crate) struct Family<S, M> {
    series: Arc<RwLock<HashMap<S, M>>>,
    make: fn() -> M,
}

impl<S, M> Clone for Family<S, M> {
    fn clone(&self) -> Self {
        Self {
            series: self.series.clone(),
            make: self.make,
        }
    }
}

impl<S, M: Default> Default for Family<S, M> {
    fn default() -> Self {
        Self::new_with_constructor(M::default)
    }
}

impl<S, M> std::fmt::Debug for Family<S, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("Family"))
            .field("series", &self.series.read().len())
            .finish()
    }
}

impl<S, M> Family<S, M> {
    /// A family whose series are made by `make` (a histogram's buckets).
    pub(crate) fn new_with_constructor(make: fn() -> M) -> Self {
        Self {
            series: Arc::default(),
            make,
        }
    }
}

impl<S: Clone + Hash + Eq, M: Clone> Family<S, M> {
    /// The series `labels`, created if new. A handle: metrics are shared counters, so a clone counts
    /// into the series.
    pub(crate) fn get_or_create(&self, labels: &S) -> M {
        if let Some(metric) = self.series.read().get(labels) {
            return metric.clone();
        }
        let mut series = self.series.write();
        (series.entry(labels.clone()))
            .or_insert_with(self.make)
            .clone()
    }

    /// As [`get_or_create`](Self::get_or_create): a handle to keep.
    pub(crate) fn get_or_create_owned(&self, labels: &S) -> M {
        self.get_or_create(labels)
    }

    /// The series `labels`, if it exists.
    pub(crate) fn get(&self, labels: &S) -> Option<M> {
        self.series.read().get(labels).cloned()
    }

    /// Removes the series `labels`; whether it existed. Handles to it still count, into nothing.
    pub(crate) fn remove(&self, labels: &S) -> bool {
        let mut series = self.series.write();
        let removed = series.remove(labels).is_some();
        series.shrink_when_sparse();
        removed
    }

    /// How much room the table has (tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.series.read().capacity()
    }
}

impl<S, M> EncodeMetric for Family<S, M>
where
    S: Clone + Hash + Eq + EncodeLabelSet,
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in self.series.read().iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.series.read().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::registry::Registry;

    use super::*;

    type Labels = [(&'static str, String); 1];

    fn context(name: &str) -> Labels {
        [("cluster", name.to_owned())]
    }

    #[test]
    fn encodes_as_prometheus_clients_family_and_gives_its_room_back() {
        let family: Family<Labels, Counter> = Family::default();
        let theirs: prometheus_client::metrics::family::Family<Labels, Counter> =
            Default::default();
        let mut registry = Registry::default();
        registry.register("ours", "Counted.", family.clone());
        let mut reference = Registry::default();
        reference.register("ours", "Counted.", theirs.clone());
        let names: Vec<String> = (0..1000).map(|i| format!("member-{i:04}")).collect();
        for (i, name) in names.iter().enumerate() {
            family.get_or_create(&context(name)).inc_by(i as u64);
            theirs.get_or_create(&context(name)).inc_by(i as u64);
        }
        let text = |registry: &Registry| {
            let mut text = String::new();
            encode(&mut text, registry).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            lines.sort();
            lines
        };
        assert_eq!(text(&registry), text(&reference));
        // A handle counts into its series.
        let handle = family.get_or_create_owned(&context("member-0001"));
        handle.inc();
        assert_eq!(family.get(&context("member-0001")).unwrap().get(), 2);
        theirs.get_or_create(&context("member-0001")).inc();

        let grown = family.capacity();
        for name in &names[10..] {
            assert!(family.remove(&context(name)));
            theirs.remove(&context(name));
        }
        assert!(!family.remove(&context("member-0999")));
        assert!(
            family.capacity() < grown / 4,
            "{} of {grown}",
            family.capacity()
        );
        assert_eq!(text(&registry), text(&reference));
        for name in &names[..10] {
            family.remove(&context(name));
            theirs.remove(&context(name));
        }
        // An empty family is left out of the text, as theirs is.
        assert_eq!(text(&registry), text(&reference));
    }
}
