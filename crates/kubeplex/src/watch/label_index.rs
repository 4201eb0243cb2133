//! A watch cache's objects by the value of one label, so that a parent's children are found without a scan.

use std::collections::{HashMap, HashSet};

use kube::{Resource, ResourceExt};
use parking_lot::Mutex;

/// A namespace/name pair: the part of an object's reference an index keeps.
pub(super) type Name = (Option<String>, String);

/// The index of one label over one cache.
pub(super) struct LabelIndex {
    label: &'static str,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_value: HashMap<String, HashSet<Name>>,
    value_of: HashMap<Name, String>,
}

impl LabelIndex {
    pub(crate) fn new(label: &'static str) -> Self {
        Self {
            label,
            entries: Mutex::default(),
        }
    }

    /// `found` of each name of the objects whose label has `value`, kept while the index is locked (no copy
    /// of the names on a reconcile's path).
    pub(crate) fn find<T>(&self, value: &str, found: impl FnMut(&Name) -> Option<T>) -> Vec<T> {
        let entries = self.entries.lock();
        entries
            .by_value
            .get(value)
            .map_or_else(Vec::new, |names| names.iter().filter_map(found).collect())
    }

    /// Every value of the label.
    pub(crate) fn values(&self) -> Vec<String> {
        let entries = self.entries.lock();
        entries.by_value.keys().cloned().collect()
    }

    /// `object` was created or changed (its label may have, too).
    pub(crate) fn applied<K: Resource>(&self, object: &K) {
        let mut entries = self.entries.lock();
        entries.remove(&name_of(object));
        if let Some(value) = object.labels().get(self.label) {
            entries.insert(name_of(object), value.clone());
        }
    }

    /// `object` was deleted.
    pub(crate) fn deleted<K: Resource>(&self, object: &K) {
        let mut entries = self.entries.lock();
        entries.remove(&name_of(object));
    }

    /// After a (re)list: the index of `objects`, the whole cache.
    pub(crate) fn rebuild<'a, K: Resource + 'a>(&self, objects: impl Iterator<Item = &'a K>) {
        let mut fresh = Entries::default();
        for object in objects {
            if let Some(value) = object.labels().get(self.label) {
                fresh.insert(name_of(object), value.clone());
            }
        }
        *self.entries.lock() = fresh;
    }
}

impl Entries {
    fn insert(&mut self, name: Name, value: String) {
        self.by_value
            .entry(value.clone())
            .or_default()
            .insert(name.clone());
        self.value_of.insert(name, value);
    }

    fn remove(&mut self, name: &Name) {
        if let Some(value) = self.value_of.remove(name)
            && let Some(names) = self.by_value.get_mut(&value)
        {
            names.remove(name);
            if names.is_empty() {
                self.by_value.remove(&value);
            }
        }
    }
}

fn name_of<K: Resource>(object: &K) -> Name {
    (object.meta().namespace.clone(), object.name_any())
}
