//! The lists that find a deleted parent's children, shared by every parent whose deletion is under way at
//! the time. Each parent needs a list from the server (not the cache, which may lag) of its children in a
//! place — a cluster, kind and namespace — that began after it asked; one list whose label selector names
//! every parent waiting there (`parent-uid in (a, b, ..)`) is such a list for each of them. One list runs
//! per place at a time: the parents that ask meanwhile wait for the next, which names them all, so a
//! thousand parents deleted together cost a few lists per place instead of one each.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Api;
use kube::api::{DynamicObject, ListParams, PartialObjectMeta};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::core::PARENT_UID_LABEL;

/// The most parents one list names (its selector's length stays far under a URL's limit).
const MOST_PER_LIST: usize = 100;

/// What a parent's list found: its children there, or why the list failed (shared by the parents it named).
pub(crate) type Found = Result<Vec<PartialObjectMeta<DynamicObject>>, Arc<kube::Error>>;

/// A place's lists: the cluster, and the URL of the kind's objects in the namespace.
type Place = (String, String);

/// A parent waiting for a list: its UID, and where its children go.
type Waiter = (String, oneshot::Sender<Found>);

/// The lists of every place, each run by one of the parents waiting there.
#[derive(Default)]
pub(crate) struct DeletionLists {
    places: Mutex<HashMap<Place, Arc<Queue>>>,
}

#[derive(Default)]
struct Queue {
    waiting: Mutex<Vec<Waiter>>,
    /// Held by the parent running the place's list.
    running: tokio::sync::Mutex<()>,
}

impl DeletionLists {
    /// The children labelled with `uid` that `api` (a cluster `context`'s, of one kind and namespace) lists,
    /// from a list that began after this call.
    pub(crate) async fn children_of(
        &self,
        context: &str,
        api: &Api<DynamicObject>,
        uid: &str,
    ) -> Found {
        let place: Place = (context.to_owned(), api.resource_url().to_owned());
        let queue = self.places.lock().entry(place.clone()).or_default().clone();
        let answer = loop {
            let (sender, mut found) = oneshot::channel();
            queue.waiting.lock().push((uid.to_owned(), sender));
            let answer = loop {
                let running = tokio::select! {
                    biased;
                    answer = &mut found => break answer,
                    running = queue.running.lock() => running,
                };
                // The list that just ended may have named this parent.
                if let Ok(answer) = found.try_recv() {
                    break Ok(answer);
                }
                let named: Vec<Waiter> = {
                    let mut waiting = queue.waiting.lock();
                    let most = waiting.len().min(MOST_PER_LIST);
                    waiting.drain(..most).collect()
                };
                list(api, named).await;
                drop(running);
            };
            // No answer: the parent running the list that named this one was cancelled before it ended
            // (its reconcile dropped): asked again, never taken as a list that found nothing.
            if let Ok(answer) = answer {
                break answer;
            }
        };
        // The last parent to leave an idle place takes it out of the map (a member that left leaves none).
        let mut places = self.places.lock();
        if Arc::strong_count(&queue) == 2 && queue.waiting.lock().is_empty() {
            places.remove(&place);
        }
        answer
    }

    /// How many places have a queue (for tests).
    #[cfg(test)]
    pub(crate) fn places(&self) -> usize {
        self.places.lock().len()
    }

    /// How many parents wait for a list to name them (for tests).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        let places = self.places.lock();
        places.values().map(|q| q.waiting.lock().len()).sum()
    }
}

/// Runs one list naming every parent of `named`, and gives each its children.
async fn list(api: &Api<DynamicObject>, named: Vec<Waiter>) {
    if named.is_empty() {
        return;
    }
    let mut uids: Vec<&str> = named.iter().map(|(uid, _)| uid.as_str()).collect();
    uids.sort_unstable();
    uids.dedup();
    let selector = format!("{PARENT_UID_LABEL} in ({})", uids.join(","));
    match api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => {
            let mut by_parent: HashMap<String, Vec<PartialObjectMeta<DynamicObject>>> =
                HashMap::new();
            for child in list.items {
                let labels = child.metadata.labels.as_ref();
                if let Some(uid) = labels.and_then(|l| l.get(PARENT_UID_LABEL)) {
                    by_parent.entry(uid.clone()).or_default().push(child);
                }
            }
            for (uid, sender) in named {
                let children = by_parent.get(&uid).cloned().unwrap_or_default();
                let _ = sender.send(Ok(children));
            }
        }
        Err(error) => {
            let error = Arc::new(error);
            for (_, sender) in named {
                let _ = sender.send(Err(error.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
