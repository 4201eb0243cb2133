//! The watches of kinds a controller neither reconciles nor owns (`watches(..)`), by cluster: a change
//! queues the parents its map function names, wherever the primary caches hold them, or every parent,
//! each at most once per [`EVERY_PARENT_WITHIN`].

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use parking_lot::RwLock;

use crate::controller::Reconcile;
use crate::core::{Cluster, Context};
use crate::engine::engine::{Engine, Primaries, ReconcileKey};
use crate::executor::KeySender;
use crate::watch::{InputWatch, Wanted};

/// How long a change that reconciles every parent waits at most, with the others that come meanwhile: a
/// storm of changes (Node heartbeats) costs one reconcile per parent per this.
pub(crate) const EVERY_PARENT_WITHIN: Duration = Duration::from_secs(1);

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

    /// Forgets the watches of member `name` (the runner closes them when it leaves).
    pub(crate) fn remove_member(&self, name: &str) {
        let mut opened = self.opened.write();
        opened.retain(|(cluster, _)| cluster.as_member().is_none_or(|m| m.name() != name));
    }
}

impl<R: Reconcile> Engine<R> {
    /// Opens every watched kind's watches in `cluster` (the kinds declared in that context, or in members
    /// when it is one), records them, and subscribes the current term's queue, if any.
    pub(crate) fn open_inputs(&self, cluster: &Cluster<R::Context>, client: &Client) {
        let declared = self.plan.watched().iter().filter(|w| match cluster {
            Cluster::Context(context) => w.contexts().contains(context),
            Cluster::Member(_) => w.in_members(),
        });
        let opened: Vec<Arc<dyn InputWatch>> = declared
            .flat_map(|w| w.open(&self.runtime.watches, cluster, client))
            .collect();
        if opened.is_empty() {
            return;
        }
        self.inputs
            .opened
            .write()
            .extend(opened.iter().map(|w| (cluster.clone(), w.clone())));
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
fn queue_every<R: Reconcile>(primaries: &Primaries<R>, keys: &KeySender<ReconcileKey<R>>) -> bool {
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
fn queue_where_cached<R: Reconcile>(
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
