//! What the fleet section's parent sees while an operator runs: its own watches of the parents and of the
//! children (kept as counters, so checking a phase costs nothing per object), the API servers' request
//! counters (409s by side), and `/readyz` polled from outside, as a kubelet would.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::app::{APP_LABEL, FleetApp, PARENT_NAMESPACE, image_of, is_ready};

/// A child: (index of its cluster, namespace, name).
pub(super) type ChildKey = (usize, String, String);

/// The scenario as the parent's watches last saw it.
#[derive(Default)]
pub(crate) struct World {
    image: String,
    contexts: Vec<String>,
    per_cluster: u32,
    /// Parent name -> ready (finalizer + Ready status).
    parents: HashMap<String, bool>,
    pub ready: usize,
    /// Child -> (UID, right image).
    children: HashMap<ChildKey, (String, bool)>,
    pub good: usize,
    /// Children deleted by hand, with their UID before; `back` counts those present again with a new UID
    /// and the right image.
    deleted: HashMap<ChildKey, String>,
    pub back: usize,
}

impl World {
    pub fn parents(&self) -> usize {
        self.parents.len()
    }

    pub fn children(&self) -> usize {
        self.children.len()
    }

    fn set_parent(&mut self, name: String, app: Option<&FleetApp>) {
        let now = app.map(|a| is_ready(a, &self.contexts, self.per_cluster));
        let was = match now {
            Some(ready) => self.parents.insert(name, ready),
            None => self.parents.remove(&name),
        };
        self.ready = self.ready + usize::from(now == Some(true)) - usize::from(was == Some(true));
    }

    fn set_child(&mut self, key: ChildKey, child: Option<&Deployment>) {
        let now = child.map(|c| {
            (
                c.uid().unwrap_or_default(),
                image_of(c) == Some(self.image.as_str()),
            )
        });
        let was = match &now {
            Some(seen) => self.children.insert(key.clone(), seen.clone()),
            None => self.children.remove(&key),
        };
        let good = |c: &Option<(String, bool)>| usize::from(c.as_ref().is_some_and(|c| c.1));
        self.good = self.good + good(&now) - good(&was);
        if let Some(old) = self.deleted.get(&key) {
            let back = |c: &Option<(String, bool)>| {
                usize::from(c.as_ref().is_some_and(|(uid, ok)| *ok && uid != old))
            };
            self.back = self.back + back(&now) - back(&was);
        }
    }

    /// Every child present, with its UID.
    pub fn uids(&self) -> HashMap<ChildKey, String> {
        (self.children.iter())
            .map(|(key, (uid, _))| (key.clone(), uid.clone()))
            .collect()
    }

    /// Picks every tenth child (in a fixed order, so both sides lose the same ones) to be deleted by hand,
    /// and remembers their UIDs.
    pub fn pick_tenth(&mut self) -> Vec<ChildKey> {
        let mut keys: Vec<&ChildKey> = self.children.keys().collect();
        keys.sort();
        let picked: Vec<ChildKey> = keys.into_iter().step_by(10).cloned().collect();
        self.deleted = picked
            .iter()
            .map(|k| (k.clone(), self.children[k].0.clone()))
            .collect();
        self.back = 0;
        picked
    }
}

/// The parent's watches of one run; they end when it is dropped.
pub(crate) struct Observer {
    world: Arc<Mutex<World>>,
    changes: watch::Receiver<()>,
    _tasks: JoinSet<()>,
}

impl Observer {
    /// Watches the parents in `control` and the children in `clusters`; returns once each watch has listed.
    pub async fn start(
        control: Client,
        clusters: &[Client],
        image: &str,
        contexts: Vec<String>,
        per_cluster: u32,
    ) -> Result<Self, String> {
        let world = Arc::new(Mutex::new(World {
            image: image.to_owned(),
            contexts,
            per_cluster,
            ..World::default()
        }));
        let (notify, changes) = watch::channel(());
        let notify = Arc::new(notify);
        let mut tasks = JoinSet::new();
        let (listed, mut lists) = tokio::sync::mpsc::channel(clusters.len() + 1);
        let parents = watcher(
            Api::<FleetApp>::namespaced(control, PARENT_NAMESPACE),
            watcher::Config::default(),
        );
        tasks.spawn(follow(
            parents.default_backoff().boxed(),
            world.clone(),
            notify.clone(),
            listed.clone(),
            |world, app: Option<&FleetApp>, name| world.set_parent(name, app),
            |world| world.parents.keys().cloned().collect(),
            |app: &FleetApp| app.name_any(),
        ));
        for (index, client) in clusters.iter().enumerate() {
            let children = watcher(
                Api::<Deployment>::all(client.clone()),
                watcher::Config::default().labels(APP_LABEL),
            );
            tasks.spawn(follow(
                children.default_backoff().boxed(),
                world.clone(),
                notify.clone(),
                listed.clone(),
                |world, child: Option<&Deployment>, key| world.set_child(key, child),
                move |world| {
                    world
                        .children
                        .keys()
                        .filter(|k| k.0 == index)
                        .cloned()
                        .collect()
                },
                move |child: &Deployment| {
                    (
                        index,
                        child.namespace().unwrap_or_default(),
                        child.name_any(),
                    )
                },
            ));
        }
        for _ in 0..=clusters.len() {
            tokio::time::timeout(Duration::from_secs(60), lists.recv())
                .await
                .map_err(|_| "the parent's watches did not list in time".to_owned())?;
        }
        Ok(Self {
            world,
            changes,
            _tasks: tasks,
        })
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        f(&mut self.world.lock())
    }

    /// Waits until `done` holds; the instant it was seen to.
    pub async fn until(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&World) -> bool,
    ) -> Result<Instant, String> {
        let mut changes = self.changes.clone();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            changes.borrow_and_update();
            if self.with(|w| done(w)) {
                return Ok(Instant::now());
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(format!("{what}: the parent's watches ended")),
                Err(_) => {
                    let (parents, ready, children, good) =
                        self.with(|w| (w.parents(), w.ready, w.children(), w.good));
                    return Err(format!(
                        "{what}: not within {limit:?} ({ready} of {parents} parents ready, {good} of {children} \
                         children with the right image)"
                    ));
                }
            }
        }
    }
}

/// Feeds one watch into the world; a re-list replaces what this watch had seen.
async fn follow<K, Key: Clone + Eq + std::hash::Hash>(
    mut events: futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    world: Arc<Mutex<World>>,
    notify: Arc<watch::Sender<()>>,
    listed: tokio::sync::mpsc::Sender<()>,
    set: impl Fn(&mut World, Option<&K>, Key),
    known: impl Fn(&World) -> Vec<Key>,
    key: impl Fn(&K) -> Key,
) {
    let mut relisted: Vec<K> = Vec::new();
    while let Some(event) = events.next().await {
        let Ok(event) = event else { continue };
        {
            let mut world = world.lock();
            match event {
                watcher::Event::Apply(object) => set(&mut world, Some(&object), key(&object)),
                watcher::Event::Delete(object) => set(&mut world, None, key(&object)),
                watcher::Event::Init => relisted.clear(),
                watcher::Event::InitApply(object) => relisted.push(object),
                watcher::Event::InitDone => {
                    let keys: std::collections::HashSet<Key> = relisted.iter().map(&key).collect();
                    for gone in known(&world).into_iter().filter(|k| !keys.contains(k)) {
                        set(&mut world, None, gone);
                    }
                    for object in relisted.drain(..) {
                        set(&mut world, Some(&object), key(&object));
                    }
                    let _ = listed.try_send(());
                }
            }
        }
        notify.send_replace(());
    }
}

/// Requests the API servers answered, from their `apiserver_request_total` counters.
#[derive(Clone, Debug, Default)]
pub(super) struct Requests {
    /// Every request to a resource, watches excepted (they are counted when they end).
    pub total: f64,
    pub conflicts: f64,
    /// `total` by verb and resource (`PATCH deployments`, `PUT fleetapps/status`).
    pub by_kind: BTreeMap<String, f64>,
}

impl std::ops::Sub for Requests {
    type Output = Requests;
    fn sub(mut self, before: Requests) -> Requests {
        for (kind, count) in before.by_kind {
            *self.by_kind.entry(kind).or_default() -= count;
        }
        self.by_kind.retain(|_, count| *count != 0.0);
        Requests {
            total: self.total - before.total,
            conflicts: self.conflicts - before.conflicts,
            by_kind: self.by_kind,
        }
    }
}

/// Sums the request counters of every server in `clients` (`GET /metrics`).
pub(super) async fn requests(clients: &[Client]) -> Result<Requests, String> {
    let mut sum = Requests::default();
    for client in clients {
        let text = crate::system::server_metrics(client).await?;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
                    .and_then(|v| v.strip_suffix('"'))
            };
            let value: f64 = value.trim().parse().unwrap_or(0.0);
            if label("verb") == Some("WATCH") || label("resource").is_none_or(str::is_empty) {
                continue;
            }
            sum.total += value;
            let resource = match label("subresource").filter(|s| !s.is_empty()) {
                Some(sub) => format!("{}/{sub}", label("resource").unwrap_or_default()),
                None => label("resource").unwrap_or_default().to_owned(),
            };
            *sum.by_kind
                .entry(format!("{} {resource}", label("verb").unwrap_or_default()))
                .or_default() += value;
            if label("code") == Some("409") {
                sum.conflicts += value;
            }
        }
    }
    Ok(sum)
}

/// `/readyz` as a kubelet sees it: polled every 250 ms, an answer other than 200 or none within 1 s (the
/// kubelet's default timeout) is a failure.
#[derive(Clone, Debug, Default, Serialize)]
pub(super) struct ProbeLog {
    pub polls: usize,
    pub failures: usize,
    pub slowest_ms: f64,
    pub first_failure: Option<String>,
}

pub(super) struct ReadyzPoller {
    log: Arc<Mutex<ProbeLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyzPoller {
    pub fn start(address: String) -> Self {
        let log = Arc::new(Mutex::new(ProbeLog::default()));
        let shared = log.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let started = Instant::now();
                let answer = tokio::time::timeout(Duration::from_secs(1), readyz(&address)).await;
                let took_ms = started.elapsed().as_secs_f64() * 1e3;
                let failure = match answer {
                    Ok(Ok(response)) if response.starts_with("HTTP/1.1 200") => None,
                    Ok(Ok(response)) => Some(response),
                    Ok(Err(error)) => Some(error.to_string()),
                    Err(_) => Some("no answer within 1 s".to_owned()),
                };
                let mut log = shared.lock();
                log.polls += 1;
                log.slowest_ms = log.slowest_ms.max(took_ms);
                if let Some(failure) = failure {
                    log.failures += 1;
                    log.first_failure
                        .get_or_insert_with(|| failure.chars().take(400).collect());
                }
            }
        });
        Self { log, task }
    }

    pub fn stop(self) -> ProbeLog {
        self.task.abort();
        self.log.lock().clone()
    }
}

/// One `GET /readyz?verbose` (from loopback: a failure's reasons); the whole response.
async fn readyz(address: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(b"GET /readyz?verbose HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}
