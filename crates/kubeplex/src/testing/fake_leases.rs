//! A stand-in API server for Leases, for the coordination loops' unit tests: Leases kept with
//! resourceVersions (a write over a stale read is refused with 409, as a real server refuses it), and for
//! each replica a link to that server which a test can slow down, silence, fail or watch.
//!
//! A request whose caller gives up (the loops bound each round by their renew deadline) is dropped before
//! it reaches the Leases, as one sent on a link that went silent never arrives.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::fake_api::{self, Seen, status};

pub(crate) mod faults;

/// A write that wins the race against the next write of a replica: it reaches the Leases just before it.
type Interloper = Box<dyn FnOnce(&FakeLeases) + Send>;

/// Told of each request of a link the moment it arrives.
type Observer = Arc<dyn Fn(&Seen) + Send + Sync>;

/// The Leases of one namespace, as the API server keeps them.
#[derive(Clone, Default)]
pub(crate) struct FakeLeases(Arc<Mutex<Store>>);

#[derive(Default)]
struct Store {
    leases: BTreeMap<String, Lease>,
    /// The resourceVersion given last.
    version: u64,
    interloper: Option<Interloper>,
}

/// One replica's link to the Leases.
#[derive(Clone)]
pub(crate) struct Link {
    client: kube::Client,
    state: Arc<LinkState>,
}

struct LinkState {
    /// While true, requests wait: the link went silent (nothing arrives, nothing is answered).
    silent: watch::Sender<bool>,
    /// How long each request takes to reach the Leases.
    delay: Mutex<Duration>,
    /// Each request that arrives is answered with this code instead, when set.
    failing: Mutex<Option<u16>>,
    /// Told of each request the moment it arrives, before it is carried out.
    observer: Mutex<Option<Observer>>,
    /// The requests that arrived, in order.
    arrived: Mutex<Vec<Seen>>,
}

impl FakeLeases {
    /// A new link of a replica to these Leases.
    pub(crate) fn link(&self) -> Link {
        let state = Arc::new(LinkState {
            silent: watch::channel(false).0,
            delay: Mutex::default(),
            failing: Mutex::default(),
            observer: Mutex::default(),
            arrived: Mutex::default(),
        });
        let (leases, carried) = (self.clone(), state.clone());
        let client = fake_api::answered_by(move |seen: Seen| {
            let (leases, state) = (leases.clone(), carried.clone());
            async move {
                let delay = *state.delay.lock();
                tokio::time::sleep(delay).await;
                let mut silent = state.silent.subscribe();
                let _ = silent.wait_for(|silent| !*silent).await;
                let observer = state.observer.lock().clone();
                if let Some(observer) = observer {
                    observer(&seen);
                }
                state.arrived.lock().push(seen.clone());
                if let Some(code) = *state.failing.lock() {
                    return status(code, "InternalError", "the server failed");
                }
                leases.answer(&seen)
            }
        });
        Link { client, state }
    }

    /// The Lease `name` as stored now.
    pub(crate) fn get(&self, name: &str) -> Option<Lease> {
        self.0.lock().leases.get(name).cloned()
    }

    /// The holder of Lease `name` now (`None` when there is no Lease or it holds nobody).
    pub(crate) fn holder(&self, name: &str) -> Option<String> {
        let lease = self.get(name)?;
        lease.spec?.holder_identity.filter(|h| !h.is_empty())
    }

    /// The names of the Leases stored now.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.lock().leases.keys().cloned().collect()
    }

    /// Stores `lease` as another party wrote it (a replica this test does not run, or a person).
    pub(crate) fn write(&self, mut lease: Lease) {
        let mut store = self.0.lock();
        store.version += 1;
        lease.metadata.resource_version = Some(store.version.to_string());
        let name = lease.metadata.name.clone().expect("a Lease has a name");
        store.leases.insert(name, lease);
    }

    /// Changes the spec of Lease `name` as another party would.
    pub(crate) fn edit(&self, name: &str, change: impl FnOnce(&mut LeaseSpec)) {
        let mut lease = self.get(name).expect("the Lease to edit exists");
        change(lease.spec.get_or_insert_with(LeaseSpec::default));
        self.write(lease);
    }

    /// Runs `write` just before the next write of any replica reaches the Leases: another replica won the
    /// race between that replica's read and its write.
    pub(crate) fn before_next_write(&self, write: impl FnOnce(&FakeLeases) + Send + 'static) {
        self.0.lock().interloper = Some(Box::new(write));
    }

    /// What the API server answers `seen`.
    fn answer(&self, seen: &Seen) -> (u16, Value) {
        let (path, query) = seen.uri.split_once('?').unwrap_or((&seen.uri, ""));
        let Some(tail) = path
            .strip_prefix("/apis/coordination.k8s.io/v1/namespaces/")
            .and_then(|rest| rest.split_once("/leases"))
            .map(|(_, tail)| tail.trim_start_matches('/'))
        else {
            return status(404, "NotFound", &format!("no such path {path}"));
        };
        let name = (!tail.is_empty()).then_some(tail);
        let interloper = match seen.method.as_str() {
            "GET" => None,
            _ => self.0.lock().interloper.take(),
        };
        if let Some(interloper) = interloper {
            interloper(self);
        }
        let mut store = self.0.lock();
        match (seen.method.as_str(), name) {
            ("GET", None) => store.list(query),
            ("GET", Some(name)) => match store.leases.get(name) {
                Some(lease) => (
                    200,
                    serde_json::to_value(lease).expect("a Lease serializes"),
                ),
                None => not_found(name),
            },
            ("POST", None) => {
                let lease: Lease = serde_json::from_str(&seen.body).expect("a Lease is posted");
                let name = lease.metadata.name.clone().unwrap_or_default();
                if store.leases.contains_key(&name) {
                    let message = format!("leases.coordination.k8s.io {name:?} already exists");
                    return status(409, "AlreadyExists", &message);
                }
                (201, store.put(lease))
            }
            ("PUT", Some(name)) => {
                let lease: Lease = serde_json::from_str(&seen.body).expect("a Lease is put");
                let Some(stored) = store.leases.get(name) else {
                    return not_found(name);
                };
                match lease.metadata.resource_version.as_deref() {
                    None => status(
                        422,
                        "Invalid",
                        "metadata.resourceVersion: must be specified",
                    ),
                    Some(version)
                        if Some(version) != stored.metadata.resource_version.as_deref() =>
                    {
                        let message = format!(
                            "Operation cannot be fulfilled on leases.coordination.k8s.io {name:?}: the \
                             object has been modified; please apply your changes to the latest version \
                             and try again"
                        );
                        status(409, "Conflict", &message)
                    }
                    Some(_) => (200, store.put(lease)),
                }
            }
            ("DELETE", Some(name)) => match store.leases.remove(name) {
                Some(_) => (
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                ),
                None => not_found(name),
            },
            (method, _) => status(405, "MethodNotAllowed", &format!("{method} {path}")),
        }
    }
}

impl Store {
    /// Stores `lease` with a new resourceVersion; the stored object.
    fn put(&mut self, mut lease: Lease) -> Value {
        self.version += 1;
        lease.metadata.resource_version = Some(self.version.to_string());
        let name = lease.metadata.name.clone().unwrap_or_default();
        let value = serde_json::to_value(&lease).expect("a Lease serializes");
        self.leases.insert(name, lease);
        value
    }

    /// The Leases whose labels match the `labelSelector` of `query` (equality terms only).
    fn list(&self, query: &str) -> (u16, Value) {
        let selector = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("labelSelector="))
            .map(percent_decoded)
            .unwrap_or_default();
        let terms: Vec<(&str, &str)> = selector
            .split(',')
            .filter_map(|term| term.split_once('='))
            .collect();
        let items: Vec<&Lease> = self
            .leases
            .values()
            .filter(|lease| {
                let labels = lease.metadata.labels.clone().unwrap_or_default();
                terms
                    .iter()
                    .all(|(key, value)| labels.get(*key).map(String::as_str) == Some(*value))
            })
            .collect();
        let list = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "LeaseList",
            "metadata": {"resourceVersion": self.version.to_string()},
            "items": items,
        });
        (200, list)
    }
}

impl Link {
    /// The Leases of the namespace `operators` through this link.
    pub(crate) fn api(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), "operators")
    }

    /// From now on requests wait (`true`), or go through again (`false`, the waiting ones as well).
    pub(crate) fn silent(&self, silent: bool) {
        self.state.silent.send_replace(silent);
    }

    /// Each request takes `delay` to reach the Leases.
    pub(crate) fn delay(&self, delay: Duration) {
        *self.state.delay.lock() = delay;
    }

    /// Each request is answered with `code` (`None`: carried out again).
    pub(crate) fn failing(&self, code: Option<u16>) {
        *self.state.failing.lock() = code;
    }

    /// `observer` is told of each request the moment it arrives, before it is carried out.
    pub(crate) fn observe(&self, observer: impl Fn(&Seen) + Send + Sync + 'static) {
        *self.state.observer.lock() = Some(Arc::new(observer));
    }

    /// The requests that arrived, as `METHOD name` lines (`LIST` for a list).
    pub(crate) fn arrived(&self) -> Vec<String> {
        let arrived = self.state.arrived.lock();
        arrived.iter().map(line).collect()
    }
}

/// `seen` as `METHOD name` (`LIST` for a list).
pub(crate) fn line(seen: &Seen) -> String {
    let path = seen.uri.split('?').next().unwrap_or_default();
    match path.split_once("/leases") {
        Some((_, "")) if seen.method == "GET" => "LIST".to_owned(),
        Some((_, "")) => seen.method.clone(),
        Some((_, name)) => format!("{} {}", seen.method, name.trim_start_matches('/')),
        None => format!("{} {path}", seen.method),
    }
}

fn not_found(name: &str) -> (u16, Value) {
    let message = format!("leases.coordination.k8s.io {name:?} not found");
    status(404, "NotFound", &message)
}

/// `text` with its `%XX` escapes decoded (a label selector in a query).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                at += 3;
            }
            (b'+', _) => {
                decoded.push(b' ');
                at += 1;
            }
            (byte, _) => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}
