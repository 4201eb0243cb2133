//! Watches of kinds a controller neither reconciles nor owns: each change is mapped to the parents it
//! concerns (or to every parent), which the engine then queues.

use std::any::TypeId;
use std::sync::Arc;

use kube::Client;
use kube::runtime::reflector::ObjectRef;

use super::watches::{ObjectChange, SharedWatch, WatchKey, WatchRegistry};
use crate::core::{Cluster, Context, PrimaryResource};

/// The parents a change of a watched object asks to reconcile, by namespace and name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// Every parent of the controller (a watch without a map function).
    Every,
    /// These parents (maybe none), wherever the controller's caches hold them.
    These(Vec<(Option<String>, String)>),
}

/// Takes what a change wants; `false` once the subscriber is gone.
type InputSink = Box<dyn Fn(Wanted) -> bool + Send + Sync>;

/// One open watch of a watched kind in one cluster, its objects mapped to parents.
pub(crate) trait InputWatch: Send + Sync {
    /// Hands `sink` what each change wants from now on, the cached objects first.
    fn subscribe(&self, sink: InputSink);
}

/// Where a watched kind is watched: the cluster, the namespace (`None`: all) and the selectors.
pub(crate) struct InputPlace<'a, C> {
    pub(crate) cluster: &'a Cluster<C>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) label_selector: Option<&'a str>,
    pub(crate) field_selector: Option<&'a str>,
}

/// Opens (or joins) the watch of `K` at `place`, mapping each change with `map` (`None`: every parent).
pub(crate) fn open_input<K, C, P>(
    registry: &WatchRegistry,
    place: &InputPlace<'_, C>,
    client: Client,
    map: Option<MapFn<K, C, P>>,
) -> Arc<dyn InputWatch>
where
    K: PrimaryResource,
    C: Context,
    P: kube::Resource<DynamicType = ()> + 'static,
{
    let key = WatchKey {
        context: place.cluster.name().to_owned(),
        kind: TypeId::of::<K>(),
        namespace: place.namespace.map(str::to_owned),
        label_selector: place.label_selector.map(str::to_owned),
        field_selector: place.field_selector.map(str::to_owned),
        index_label: None,
    };
    let watch = registry.watch::<K>(key, client);
    Arc::new(Input {
        watch,
        cluster: place.cluster.clone(),
        map,
    })
}

/// The map function of a watched kind: the object, the cluster it is in, and whether it is gone (deleted,
/// or missing from a relist), to the parents to reconcile.
pub type MapFn<K, C, P> = fn(&K, &Cluster<C>, bool) -> Vec<ObjectRef<P>>;

struct Input<K: PrimaryResource, C, P: kube::Resource<DynamicType = ()>> {
    watch: Arc<SharedWatch<K>>,
    cluster: Cluster<C>,
    map: Option<MapFn<K, C, P>>,
}

impl<K, C, P> InputWatch for Input<K, C, P>
where
    K: PrimaryResource,
    C: Context,
    P: kube::Resource<DynamicType = ()> + 'static,
{
    fn subscribe(&self, sink: InputSink) {
        let (cluster, map) = (self.cluster.clone(), self.map);
        self.watch.subscribe(move |change| {
            let Some(map) = map else {
                return sink(Wanted::Every);
            };
            let gone = matches!(change, ObjectChange::Deleted(_));
            let parents = map(change.object(), &cluster, gone);
            sink(Wanted::These(
                parents.into_iter().map(|p| (p.namespace, p.name)).collect(),
            ))
        });
    }
}
