//! Where a controller's keys come from, and where they go: each primary watch gives the keys of its
//! objects, each child cache the keys of the parents of its children (a child's change is a change of its
//! parent), each watched kind's watch the keys of the parents its map function names (or of every
//! parent), and they all send into the key queue of the current term as leader, which holds each key once.
//! A standby has no queue: a new term subscribes every cache anew, so it starts with every cached object.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::controller::DynReconcile;
use crate::core::Cluster;
use crate::engine::engine::{Engine, Primaries, Primary, ReconcileKey};
use crate::executor::KeySender;
use crate::watch::{ChangeFilter, ChildCache, ChildChangeKind, InputWatch, SharedWatch, Wanted};

/// How long a change of a watched kind that reconciles every parent waits at most, with the others that
/// come meanwhile: a storm of changes (Node heartbeats) costs one reconcile per parent per this.
const EVERY_PARENT_WITHIN: Duration = Duration::from_secs(1);

impl<R: DynReconcile> Engine<R> {
    /// Subscribes `keys` to the primary watch of `context`: every cached object first, then each change
    /// that reconciles (see [`ChangeFilter`]).
    pub(crate) fn follow_primaries(
        watch: &SharedWatch<Primary<R>>,
        context: Cluster<R::Context>,
        keys: KeySender<ReconcileKey<R>>,
    ) {
        let changed = ChangeFilter::default();
        watch.subscribe(move |change| {
            if !changed.passes(change) {
                return keys.is_open();
            }
            keys.send(ReconcileKey {
                context: context.clone(),
                object: ObjectRef::from_obj(change.object()),
            })
        });
    }

    /// Subscribes `keys` to a child cache: the parent of every cached child first, then of each child
    /// that changes, when the parent is one of this controller's. A change of a child's health alone
    /// waits at most the plan's health debounce, with the others of that parent.
    pub(crate) fn follow_children(&self, cache: &dyn ChildCache, keys: KeySender<ReconcileKey<R>>) {
        let plan = self.plan.clone();
        let within = plan.health_debounce();
        cache.subscribe_parents(Box::new(move |parent, change| {
            match (Self::key_for(&plan, &parent), change) {
                (Some(key), ChildChangeKind::Object) => keys.send(key),
                (Some(key), ChildChangeKind::Health) => keys.send_within(key, within),
                (None, _) => keys.is_open(),
            }
        }));
    }

    /// A term begins: `keys` is its queue, and every cache the controller has now (its contexts', its
    /// members', the held shards') sends into it, every cached object first. A cache opened later in the
    /// term is subscribed by whoever opens it, after this queue is known: none is missed.
    pub(crate) fn begin_term(&self, keys: &KeySender<ReconcileKey<R>>) {
        self.term_keys.set(Some(keys.clone()));
        for (context, watch) in self.primaries.all() {
            Self::follow_primaries(&watch, context, keys.clone());
        }
        for watch in self.all_child_watches() {
            self.follow_children(&*watch.cache, keys.clone());
        }
        for watch in self.inputs.all() {
            self.follow_input(&*watch, keys.clone());
        }
    }

    /// Queues every parent of the controller's primary caches, so that each is reconciled for the members as
    /// they are now. A standby skips this: its next term starts with every cached parent anyway.
    pub(crate) fn queue_every_parent(&self) {
        let Some(keys) = self.term_keys.get() else {
            return;
        };
        for (context, watch) in self.primaries.all() {
            for object in watch.store().state() {
                let object = ObjectRef::from_obj(&*object);
                if !keys.send(ReconcileKey {
                    context: context.clone(),
                    object,
                }) {
                    return;
                }
            }
        }
    }

    /// Opens every watched kind's watches in `cluster` (the kinds declared in that context, or in members
    /// when it is one), records them, and subscribes the current term's queue, if any.
    pub(crate) fn open_inputs(&self, cluster: &Cluster<R::Context>, client: &Client) {
        let declared = (self.plan.watched().iter()).filter(|w| w.is_watched_in(cluster));
        let opened: Vec<Arc<dyn InputWatch>> = declared
            .flat_map(|w| w.open(&self.runtime.watches, cluster, client))
            .collect();
        if opened.is_empty() {
            return;
        }
        self.inputs.add(cluster, &opened);
        if let Some(keys) = self.term_keys.get() {
            for watch in &opened {
                self.follow_input(&**watch, keys.clone());
            }
        }
    }

    /// Subscribes `keys` to a watched kind's watch: the parents each change wants, from the primary caches
    /// as they are then.
    pub(crate) fn follow_input(&self, watch: &dyn InputWatch, keys: KeySender<ReconcileKey<R>>) {
        let primaries = self.primaries.clone();
        watch.subscribe(Box::new(move |wanted| match wanted {
            Wanted::Every => queue_every(&primaries, &keys),
            Wanted::These(parents) => {
                for (namespace, name) in parents {
                    if !queue_where_cached(&primaries, &keys, namespace.as_deref(), &name) {
                        return false;
                    }
                }
                keys.is_open()
            }
        }));
    }
}

/// Queues every cached parent to run within [`EVERY_PARENT_WITHIN`]; `false` once the queue is gone.
fn queue_every<R: DynReconcile>(
    primaries: &Primaries<R>,
    keys: &KeySender<ReconcileKey<R>>,
) -> bool {
    for (context, watch) in primaries.all() {
        for object in watch.store().state() {
            let key = ReconcileKey {
                context: context.clone(),
                object: ObjectRef::from_obj(&*object),
            };
            if !keys.send_within(key, EVERY_PARENT_WITHIN) {
                return false;
            }
        }
    }
    keys.is_open()
}

/// Queues the parent `namespace`/`name` in each cluster whose primary cache holds it; `false` once the
/// queue is gone.
fn queue_where_cached<R: DynReconcile>(
    primaries: &Primaries<R>,
    keys: &KeySender<ReconcileKey<R>>,
    namespace: Option<&str>,
    name: &str,
) -> bool {
    let mut object = ObjectRef::new(name);
    if let Some(namespace) = namespace {
        object = object.within(namespace);
    }
    for (context, watch) in primaries.all() {
        if watch.store().get(&object).is_some() {
            let key = ReconcileKey {
                context,
                object: object.clone(),
            };
            if !keys.send(key) {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    //! A term's sources: every cache sends into the one queue, which holds each key once.

    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ApiResource;
    use kube::runtime::reflector::{self, ObjectRef};
    use kube::runtime::watcher;

    use crate::core::PARENT_UID_LABEL;
    use crate::engine::engine::{ChildWatch, ReconcileKey};
    use crate::engine::test_engine::{
        CLUSTER_A, CONTROL_CLUSTER, TestController, child_meta, engine, parent,
    };
    use crate::executor::key_queue;
    use crate::watch::SharedWatch;

    /// A watch whose cache holds `objects`.
    fn cached(objects: Vec<ConfigMap>, index: Option<&'static str>) -> Arc<SharedWatch<ConfigMap>> {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        for object in objects {
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        Arc::new(SharedWatch::fed(store, index))
    }

    /// A child of the test parent in cluster-a, called `name`.
    fn child(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: child_meta(name),
            ..ConfigMap::default()
        }
    }

    #[tokio::test]
    async fn a_term_queues_each_cached_parent_once_whichever_caches_name_it() {
        let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let mut engine = engine(client);
        engine.primaries.insert(
            (CONTROL_CLUSTER, Some("crds".into())),
            cached(vec![parent(&[])], None),
        );
        engine.children.push(ChildWatch {
            context: crate::core::Context::name(&CLUSTER_A).into(),
            resource: ApiResource::erase::<ConfigMap>(&()),
            namespace: None,
            cache: crate::watch::judged(
                cached(vec![child("a"), child("b")], Some(PARENT_UID_LABEL)),
                crate::core::builtin_rule("", "ConfigMap"),
            ),
            answered: Default::default(),
            applied: Default::default(),
        });
        let (keys, queue) = key_queue(Duration::ZERO, Default::default(), Default::default());
        engine.begin_term(&keys);
        let parent_key = ReconcileKey::<TestController> {
            context: CONTROL_CLUSTER,
            object: ObjectRef::from_obj(&parent(&[])),
        };
        assert!(
            queue.waiting() == [parent_key.clone()],
            "the primary's cache and both children name it: it waits once"
        );
        assert!(
            engine.term_keys.get().is_some(),
            "later caches find the term's queue"
        );

        // Each member change queues every parent again, into the same entry.
        engine.queue_every_parent();
        assert!(queue.waiting() == [parent_key]);
    }
}
