//! Shared watches: one watcher and cache per (cluster, kind, namespace, selectors), however many controllers
//! need it, each handing every change to every subscriber (which turns it into a key for its queue). A watch of `PartialObjectMeta<K>`
//! caches metadata only (kube sends metadata requests for it).

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::task::JoinSet;

use super::label_index::LabelIndex;
use crate::core::{ApiScope, PrimaryResource, Shrink, kind_label, object_ref};
use crate::executor::RetryBackoff;
use crate::metrics::{Metrics, WatchMetrics, gauge_value};
use crate::readiness::{Readiness, WatchEntry, WatchReadiness};

/// What identifies a watch: two requests with the same key share one watch and one cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WatchKey {
    pub(crate) context: String,
    pub(crate) kind: TypeId,
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    /// A label whose values the cache is indexed by (children by their parent's UID).
    pub(crate) index_label: Option<&'static str>,
}

/// A change seen by a watch, handed to each subscriber's key function.
#[derive(Debug)]
pub(crate) enum ObjectChange<'a, K> {
    /// Created, updated, or listed.
    Applied(&'a K),
    /// Deleted, or gone from a relist.
    Deleted(&'a K),
}

impl<K> ObjectChange<'_, K> {
    /// The object, whatever happened to it.
    pub(crate) fn object(&self) -> &K {
        match self {
            ObjectChange::Applied(object) | ObjectChange::Deleted(object) => object,
        }
    }
}

/// Takes a change (into its queue, as a key); `false` once the subscriber is gone.
type Subscriber<K> = Box<dyn Fn(&ObjectChange<'_, K>) -> bool + Send + Sync>;

/// One running watch of kind `K` and its cache.
pub(crate) struct SharedWatch<K: PrimaryResource> {
    store: Store<K>,
    listed: Shared<BoxFuture<'static, bool>>,
    /// Turns true once the first list has been handed to the subscribers and indexed: the store alone is
    /// ready a moment earlier, when a reader would still find the index empty and its keys unsent.
    handed_out: tokio::sync::watch::Sender<bool>,
    subscribers: Mutex<Vec<Subscriber<K>>>,
    index: Option<LabelIndex>,
}

impl<K: PrimaryResource> SharedWatch<K> {
    pub(crate) fn new(store: Store<K>, index_label: Option<&'static str>) -> Self {
        // `Store::wait_until_ready` keeps one waker: of several tasks waiting for the same store, only the
        // one that polled last is woken when it lists (and a `now_or_never` leaves no one to wake). So the
        // store is waited for once, here, and every waiter waits for that; nothing else may call it.
        let ready = store.clone();
        let (handed_out, mut handed) = tokio::sync::watch::channel(false);
        #[expect(
            clippy::disallowed_methods,
            reason = "the one wait for the store, which `listed` shares"
        )]
        let listed = async move {
            // A watch that ends before it lists fails the store's wait; once listed, the handing out
            // follows in the same step of the watch's task.
            ready.wait_until_ready().await.is_ok() && handed.wait_for(|done| *done).await.is_ok()
        }
        .boxed()
        .shared();
        Self {
            store,
            listed,
            handed_out,
            subscribers: Mutex::default(),
            index: index_label.map(LabelIndex::new),
        }
    }

    /// A watch over a cache its caller fills (a test's), whose first list counts as handed out as soon as
    /// the cache has it.
    #[cfg(test)]
    pub(crate) fn fed(store: Store<K>, index_label: Option<&'static str>) -> Self {
        let watch = Self::new(store, index_label);
        watch.handed_out.send_replace(true);
        watch
    }

    /// The watch's cache.
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Resolves once the first list is in the cache, indexed, and handed to every subscriber (`true`), or
    /// once the watch has ended without one (`false`). Any number of tasks may wait at once.
    pub(crate) fn listed(&self) -> impl Future<Output = bool> + Send + 'static {
        self.listed.clone()
    }

    /// Whether the first list is in the cache and handed out now.
    pub(crate) fn has_listed(&self) -> bool {
        self.listed.clone().now_or_never() == Some(true)
    }

    /// Hands `deliver` every change from now on, preceded by the objects already cached (so a late
    /// subscriber misses nothing), until it returns `false`. It is called while the watch publishes: it
    /// queues a key, and waits for nothing.
    pub(crate) fn subscribe(
        &self,
        deliver: impl Fn(&ObjectChange<'_, K>) -> bool + Send + Sync + 'static,
    ) {
        let mut subscribers = self.subscribers.lock();
        for object in self.store.state() {
            if !deliver(&ObjectChange::Applied(&object)) {
                return;
            }
        }
        subscribers.push(Box::new(deliver));
    }

    /// The cached objects whose index label has `value` (empty without an index).
    pub(crate) fn indexed(&self, value: &str) -> Vec<Arc<K>> {
        let Some(index) = &self.index else {
            return Vec::new();
        };
        index.find(value, |name| {
            self.store.get(&object_ref(name.0.as_deref(), &name.1))
        })
    }

    /// Every value of the index label in the cache.
    pub(crate) fn index_values(&self) -> Vec<String> {
        self.index
            .as_ref()
            .map_or_else(Vec::new, LabelIndex::values)
    }

    fn publish(&self, change: &ObjectChange<'_, K>) {
        let mut subscribers = self.subscribers.lock();
        subscribers.retain(|subscriber| subscriber(change));
    }

    fn index_applied(&self, object: &K) {
        if let Some(index) = &self.index {
            index.applied(object);
        }
    }

    fn index_deleted(&self, object: &K) {
        if let Some(index) = &self.index {
            index.deleted(object);
        }
    }

    /// After a (re)list: the index from the new cache.
    fn reindex(&self) {
        if let Some(index) = &self.index {
            index.rebuild(self.store.state().iter().map(|o| &**o));
        }
    }
}

/// One open watch: the watch itself (a `SharedWatch` of its key's kind) and what closing it for good takes —
/// its task, its place in the readiness report, its metrics' kind label.
struct Opened {
    watch: Arc<dyn Any + Send + Sync>,
    task: tokio::task::AbortHandle,
    readiness: WatchEntry,
    kind: String,
}

/// Every watch of a manager.
pub(crate) struct WatchRegistry {
    watches: Mutex<HashMap<WatchKey, Opened>>,
    tasks: Mutex<JoinSet<()>>,
    opened: AtomicUsize,
    readiness: Arc<Readiness>,
    metrics: Metrics,
}

impl WatchRegistry {
    pub(crate) fn new(readiness: Arc<Readiness>, metrics: Metrics) -> Self {
        Self {
            watches: Mutex::default(),
            tasks: Mutex::new(JoinSet::new()),
            opened: AtomicUsize::new(0),
            readiness,
            metrics,
        }
    }

    /// The watch for `key`, started now if no one asked for it before.
    pub(crate) fn watch<K: PrimaryResource>(
        &self,
        key: WatchKey,
        client: Client,
    ) -> Arc<SharedWatch<K>> {
        self.watch_with(key, client, |_| {})
    }

    /// Like [`watch`](Self::watch), with `transform` applied to every object before it is cached (by the
    /// watch that starts now; a key names one transform, as it names one kind).
    pub(crate) fn watch_with<K: PrimaryResource>(
        &self,
        key: WatchKey,
        client: Client,
        transform: fn(&mut K),
    ) -> Arc<SharedWatch<K>> {
        debug_assert_eq!(key.kind, TypeId::of::<K>());
        let mut watches = self.watches.lock();
        if let Some(existing) = watches.get(&key) {
            return Arc::clone(&existing.watch)
                .downcast()
                .expect("a watch key names its kind");
        }
        let (store, writer) = reflector::store();
        let watch = Arc::new(SharedWatch::new(store, key.index_label));

        let api: Api<K> = <K::Scope as ApiScope>::api(client, key.namespace.as_deref());
        let mut config = watcher::Config::default();
        if let Some(selector) = &key.label_selector {
            config = config.labels(selector);
        }
        if let Some(selector) = &key.field_selector {
            config = config.fields(selector);
        }
        let readiness = self.readiness.watch_started(
            &key.context,
            key.namespace.as_deref(),
            kind_label::<K>(),
            K::plural(&()).into_owned(),
        );
        let metrics =
            self.metrics
                .watch(&key.context, &kind_label::<K>(), key.namespace.as_deref());
        let events = watcher::watcher(api, config)
            .modify(transform)
            .reflect(writer);
        self.opened.fetch_add(1, Ordering::Relaxed);
        let entry = readiness.entry();
        let task = run(
            events,
            watch.clone(),
            readiness,
            metrics,
            RetryBackoff::default(),
        );
        let task = self.tasks.lock().spawn(task);
        let opened = Opened {
            watch: watch.clone(),
            task,
            readiness: entry,
            kind: kind_label::<K>(),
        };
        watches.insert(key, opened);
        watch
    }

    /// Closes the watch for `key` for good: its task ends, it leaves the readiness report and the metrics,
    /// and its cache is freed once no one holds it (a reconcile in flight may, until it ends). Nothing
    /// happens if it is not open.
    pub(crate) fn release(&self, key: &WatchKey) {
        let opened = {
            let mut watches = self.watches.lock();
            let opened = watches.remove(key);
            watches.shrink_when_sparse();
            opened
        };
        if let Some(opened) = opened {
            opened.task.abort();
            self.readiness.forget_watch(&opened.readiness);
            let namespace = key.namespace.as_deref();
            self.metrics
                .watch_closed(&key.context, &opened.kind, namespace);
        }
    }

    /// Closes every watch whose key `matches` (see [`release`](Self::release)).
    pub(crate) fn release_matching(&self, matches: impl Fn(&WatchKey) -> bool) {
        let keys: Vec<WatchKey> = {
            let watches = self.watches.lock();
            watches.keys().filter(|k| matches(k)).cloned().collect()
        };
        for key in &keys {
            self.release(key);
        }
        // The aborted tasks' slots are freed now, not when the manager stops: members come and go.
        let mut tasks = self.tasks.lock();
        while tasks.try_join_next().is_some() {}
    }

    /// Every watch of kind `K` in `context`, whatever its namespace or selectors.
    pub(crate) fn watches_of<K: PrimaryResource>(&self, context: &str) -> Vec<Arc<SharedWatch<K>>> {
        let watches = self.watches.lock();
        watches
            .iter()
            .filter(|(key, _)| key.context == context && key.kind == TypeId::of::<K>())
            .filter_map(|(_, opened)| Arc::clone(&opened.watch).downcast().ok())
            .collect()
    }

    /// How many watches were opened (one per distinct key).
    pub(crate) fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }

    /// Ends every watch.
    pub(crate) fn shutdown(&self) {
        self.tasks.lock().abort_all();
    }
}

impl Drop for WatchRegistry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Drives one watch: keeps the cache (the reflector does), publishes changes, reports its readiness, and
/// retries failures with backoff.
async fn run<K: PrimaryResource>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    watch: Arc<SharedWatch<K>>,
    readiness: WatchReadiness,
    metrics: WatchMetrics,
    mut backoff: RetryBackoff,
) {
    futures::pin_mut!(events);
    // The cache as it was when a (re)list began: what is missing from the new list was deleted meanwhile.
    let mut before_list: Option<Vec<Arc<K>>> = None;
    while let Some(item) = events.next().await {
        match item {
            Ok(Event::Init) => before_list = Some(watch.store.state()),
            // The reflector swaps a (re)list into the cache only at `InitDone`: a key published earlier would
            // find its object missing and be taken as deleted. So listed objects are published from the cache
            // once it has them.
            Ok(Event::InitApply(_)) => readiness.working(),
            Ok(Event::InitDone) => {
                backoff.reset();
                watch.reindex();
                let listed = watch.store.state();
                if let Some(before) = before_list.take() {
                    let now: HashSet<ObjectRef<K>> =
                        listed.iter().map(|o| ObjectRef::from_obj(&**o)).collect();
                    for gone in before
                        .iter()
                        .filter(|o| !now.contains(&ObjectRef::from_obj(&***o)))
                    {
                        watch.publish(&ObjectChange::Deleted(gone));
                    }
                }
                for object in &listed {
                    watch.publish(&ObjectChange::Applied(object));
                }
                watch.handed_out.send_replace(true);
                metrics.event();
                metrics.objects.set(gauge_value(listed.len()));
                readiness.synced();
            }
            Ok(Event::Apply(object)) => {
                backoff.reset();
                readiness.working();
                watch.index_applied(&object);
                watch.publish(&ObjectChange::Applied(&object));
                metrics.event();
                metrics.applied.inc();
                metrics.objects.set(gauge_value(watch.store.len()));
            }
            Ok(Event::Delete(object)) => {
                backoff.reset();
                readiness.working();
                watch.index_deleted(&object);
                watch.publish(&ObjectChange::Deleted(&object));
                metrics.event();
                metrics.deleted.inc();
                metrics.objects.set(gauge_value(watch.store.len()));
            }
            Err(error) => {
                metrics.restarted(crate::core::watch_failure_label(&error));
                readiness.failed(&error);
                if !crate::readiness::is_expired(&error) {
                    readiness.retry_after(backoff.next_delay()).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
