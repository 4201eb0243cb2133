//! Shared watches: one watcher and cache per (context, kind, namespace, selectors), however many controllers
//! need it, each fanning its changes out to every subscriber.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as start_watcher};
use kube::{Api, Client};

use crate::scope::ApiScope;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::backoff::WatchBackoff;
use crate::controller::PrimaryResource;
use crate::health::{Health, WatchHealth};

/// What identifies a watch: two requests with the same key share one watch and one cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct WatchKey {
    pub(crate) context: String,
    pub(crate) kind: TypeId,
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
}

/// A change seen by a watch, handed to each subscriber.
#[derive(Debug)]
pub(crate) enum Change<K> {
    /// Created, updated, or listed.
    Applied(Arc<K>),
    /// Deleted.
    Deleted(Arc<K>),
}

/// One running watch of kind `K` and its cache.
pub(crate) struct SharedWatch<K: PrimaryResource> {
    store: Store<K>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Change<K>>>>,
}

impl<K: PrimaryResource> SharedWatch<K> {
    /// The watch's cache.
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Every change from now on, preceded by the objects already cached (so a late subscriber misses nothing;
    /// an object may arrive twice, which the queue absorbs).
    pub(crate) fn subscribe(&self) -> mpsc::UnboundedReceiver<Change<K>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        for object in self.store.state() {
            let _ = sender.send(Change::Applied(object));
        }
        subscribers.push(sender);
        receiver
    }

    fn publish(&self, change: impl Fn() -> Change<K>) {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers.retain(|subscriber| subscriber.send(change()).is_ok());
    }
}

/// Every watch of a manager.
pub(crate) struct WatchRegistry {
    watches: Mutex<HashMap<WatchKey, Arc<dyn Any + Send + Sync>>>,
    tasks: Mutex<JoinSet<()>>,
    opened: AtomicUsize,
    health: Arc<Health>,
    backoff: WatchBackoff,
}

impl WatchRegistry {
    pub(crate) fn new(health: Arc<Health>, backoff: WatchBackoff) -> Self {
        Self {
            watches: Mutex::default(),
            tasks: Mutex::new(JoinSet::new()),
            opened: AtomicUsize::new(0),
            health,
            backoff,
        }
    }

    /// The watch for `key`, started now if no one asked for it before.
    pub(crate) fn watch<K: PrimaryResource>(
        &self,
        key: WatchKey,
        client: Client,
    ) -> Arc<SharedWatch<K>> {
        debug_assert_eq!(key.kind, TypeId::of::<K>());
        let mut watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = watches.get(&key) {
            return Arc::clone(existing)
                .downcast()
                .expect("a watch key names its kind");
        }
        let (store, writer) = reflector::store();
        let watch = Arc::new(SharedWatch {
            store,
            subscribers: Mutex::default(),
        });
        watches.insert(key.clone(), watch.clone());
        drop(watches);

        let api: Api<K> = <K::Scope as ApiScope>::api(client, key.namespace.as_deref());
        let mut config = watcher::Config::default();
        if let Some(selector) = &key.label_selector {
            config = config.labels(selector);
        }
        if let Some(selector) = &key.field_selector {
            config = config.fields(selector);
        }
        let health = self.health.watch_started::<K>(&key);
        let stream = start_watcher(api, config)
            .backoff(self.backoff.clone())
            .reflect(writer);
        let publisher = watch.clone();
        self.opened.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("watch", context = %key.context, kind = %K::kind(&()),
            namespace = key.namespace.as_deref().unwrap_or("*"));
        let task = tracing::Instrument::instrument(run(stream, publisher, health), span);
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spawn(task);
        watch
    }

    /// Every watch of kind `K` in `context`, whatever its namespace or selectors.
    pub(crate) fn watches_of<K: PrimaryResource>(&self, context: &str) -> Vec<Arc<SharedWatch<K>>> {
        let watches = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        watches
            .iter()
            .filter(|(key, _)| key.context == context && key.kind == TypeId::of::<K>())
            .filter_map(|(_, watch)| Arc::clone(watch).downcast().ok())
            .collect()
    }

    /// How many watches were opened (one per distinct key).
    pub(crate) fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }

    /// Ends every watch.
    pub(crate) fn shutdown(&self) {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
    }
}

impl Drop for WatchRegistry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn run<K: PrimaryResource>(
    stream: impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
    watch: Arc<SharedWatch<K>>,
    health: WatchHealth,
) {
    futures::pin_mut!(stream);
    // The reflector swaps a (re)list into the store only at `InitDone`: a request published earlier would
    // find its object missing from the cache and be dropped as deleted (with a paginated list, every page but
    // the last). So listed objects are published from the cache once it has them, sharing its copies.
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Init) => {}
            Ok(Event::InitDone) => {
                for object in watch.store.state() {
                    watch.publish(|| Change::Applied(object.clone()));
                }
                health.synced();
            }
            Ok(Event::InitApply(_)) => health.working(),
            Ok(Event::Apply(object)) => {
                health.working();
                let object = Arc::new(object);
                watch.publish(|| Change::Applied(object.clone()));
            }
            Ok(Event::Delete(object)) => {
                health.working();
                let object = Arc::new(object);
                watch.publish(|| Change::Deleted(object.clone()));
            }
            Err(error) => health.failed(&error),
        }
    }
}

/// A channel's receiving end as a stream.
pub(crate) fn receiver_stream<T>(
    mut receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
