//! A queue that holds each key once: what a watch hands to a controller.
//!
//! A controller reads the object from the cache when it reconciles, so it needs to know *which* keys
//! changed, not every version in between. Ten thousand updates to a hundred objects, queued while the
//! controller is busy, cost a hundred entries, and the reconcile sees the latest state.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures::Stream;
use futures::task::AtomicWaker;
use parking_lot::Mutex;

struct Shared<T> {
    state: Mutex<State<T>>,
    waker: AtomicWaker,
}

struct State<T> {
    order: VecDeque<T>,
    queued: HashSet<T>,
}

/// The receiving end: a stream of keys, each at most once until taken.
pub(crate) struct KeyStream<T> {
    shared: Arc<Shared<T>>,
}

/// The sending end; it stops accepting keys once the stream is dropped.
pub(crate) struct KeySender<T> {
    shared: Weak<Shared<T>>,
}

impl<T> Clone for KeySender<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

/// A new, empty queue.
pub(crate) fn key_queue<T: Clone + Eq + Hash>() -> (KeySender<T>, KeyStream<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            order: VecDeque::new(),
            queued: HashSet::new(),
        }),
        waker: AtomicWaker::new(),
    });
    let sender = KeySender {
        shared: Arc::downgrade(&shared),
    };
    (sender, KeyStream { shared })
}

impl<T: Clone + Eq + Hash> KeySender<T> {
    /// Queues `key` unless it is queued already; `false` once the stream is gone.
    pub(crate) fn send(&self, key: T) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let mut state = shared.state.lock();
        if state.queued.insert(key.clone()) {
            state.order.push_back(key);
        }
        drop(state);
        shared.waker.wake();
        true
    }

    /// Whether the stream still exists.
    pub(crate) fn is_open(&self) -> bool {
        self.shared.strong_count() > 0
    }
}

impl<T> KeyStream<T> {
    /// How many keys wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shared.state.lock().order.len()
    }
}

impl<T: Clone + Eq + Hash> Stream for KeyStream<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let shared = &self.shared;
        let take = |shared: &Shared<T>| {
            let mut state = shared.state.lock();
            let key = state.order.pop_front()?;
            state.queued.remove(&key);
            // A burst leaves capacity for every key it held: give it back once the queue drains.
            if state.order.is_empty() && state.queued.capacity() > 1024 {
                state.queued.shrink_to_fit();
                state.order.shrink_to_fit();
            }
            Some(key)
        };
        if let Some(key) = take(shared) {
            return Poll::Ready(Some(key));
        }
        shared.waker.register(cx.waker());
        // A key sent between the first look and the registration would otherwise wait for the next one.
        match take(shared) {
            Some(key) => Poll::Ready(Some(key)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn a_key_sent_many_times_waits_once_in_first_sent_order() {
        let (sender, mut stream) = key_queue();
        for round in 0..100 {
            for key in 0..100 {
                assert!(sender.send((key + round) % 100));
            }
        }
        assert_eq!(stream.len(), 100);
        let drained: Vec<i32> = (&mut stream).take(100).collect().await;
        assert_eq!(drained, (0..100).collect::<Vec<_>>());
        // Taken keys can be queued again.
        sender.send(7);
        assert_eq!(stream.next().await, Some(7));
    }

    #[tokio::test]
    async fn a_waiting_stream_wakes_and_a_dropped_one_refuses_keys() {
        let (sender, mut stream) = key_queue::<u8>();
        let waiter = tokio::spawn(async move { stream.next().await });
        tokio::task::yield_now().await;
        sender.send(1);
        assert_eq!(waiter.await.unwrap(), Some(1));
        assert!(!sender.is_open());
        assert!(!sender.send(2));
    }
}
