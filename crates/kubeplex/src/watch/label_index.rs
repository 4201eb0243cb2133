//! A watch cache's objects by the value of one label, so that a parent's children are found without a scan.
//! An object with several values (a shared child's parents) carries one label per value, the label's key
//! followed by `.` and the value (`kubeplex.dev/parent-uid.<uid>`), and is found under each.

use std::collections::{HashMap, HashSet};

use kube::{Resource, ResourceExt};
use parking_lot::Mutex;

/// A namespace/name pair: the part of an object's reference an index keeps.
pub(super) type Name = (Option<String>, String);

/// The index of one label over one cache.
pub(super) struct LabelIndex {
    label: &'static str,
    /// `label` and `.`: the keys of an object's further values.
    prefix: String,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_value: HashMap<String, HashSet<Name>>,
    values_of: HashMap<Name, Vec<String>>,
}

impl LabelIndex {
    pub(crate) fn new(label: &'static str) -> Self {
        Self {
            label,
            prefix: format!("{label}."),
            entries: Mutex::default(),
        }
    }

    /// The values `object` is found under.
    fn values_of<K: Resource>(&self, object: &K) -> Vec<String> {
        let labels = object.labels();
        let one = labels.get(self.label).cloned();
        let more = (labels.keys()).filter_map(|key| key.strip_prefix(&self.prefix));
        one.into_iter().chain(more.map(str::to_owned)).collect()
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
        entries.insert(name_of(object), self.values_of(object));
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
            fresh.insert(name_of(object), self.values_of(object));
        }
        *self.entries.lock() = fresh;
    }
}

impl Entries {
    fn insert(&mut self, name: Name, values: Vec<String>) {
        if values.is_empty() {
            return;
        }
        for value in &values {
            let names = self.by_value.entry(value.clone()).or_default();
            names.insert(name.clone());
        }
        self.values_of.insert(name, values);
    }

    fn remove(&mut self, name: &Name) {
        for value in self.values_of.remove(name).into_iter().flatten() {
            if let Some(names) = self.by_value.get_mut(&value) {
                names.remove(name);
                if names.is_empty() {
                    self.by_value.remove(&value);
                }
            }
        }
    }
}

fn name_of<K: Resource>(object: &K) -> Name {
    (object.meta().namespace.clone(), object.name_any())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.collect()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn found(index: &LabelIndex, value: &str) -> Vec<String> {
        let mut names = index.find(value, |(_, name)| Some(name.clone()));
        names.sort();
        names
    }

    #[test]
    fn an_object_with_several_values_is_found_under_each_until_it_drops_one() {
        let index = LabelIndex::new("kubeplex.dev/parent-uid");
        let one = object("one", &[("kubeplex.dev/parent-uid", "a")]);
        let shared = object(
            "shared",
            &[
                ("kubeplex.dev/parent-uid.a", "true"),
                ("kubeplex.dev/parent-uid.b", "true"),
                ("kubeplex.dev/parent-uidx", "c"),
            ],
        );
        index.rebuild([&one, &shared].into_iter());
        assert_eq!(found(&index, "a"), ["one", "shared"]);
        assert_eq!(found(&index, "b"), ["shared"]);
        assert!(found(&index, "c").is_empty(), "another label's key");

        index.applied(&object("shared", &[("kubeplex.dev/parent-uid.b", "true")]));
        assert_eq!(found(&index, "a"), ["one"]);
        assert_eq!(found(&index, "b"), ["shared"]);
        index.deleted(&shared);
        assert!(found(&index, "b").is_empty());
        let mut values = index.values();
        values.sort();
        assert_eq!(values, ["a"]);
    }
}
