//! Sharded by context: a replica watches a context's primaries only while it holds the context's shard,
//! so the primaries' memory is split between the replicas. Gaining a shard opens its watches (their first
//! list queues every parent there); losing it closes them and frees their caches.

use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};

use super::engine::{Engine, Primary, ReconcileKey};
use crate::controller::Reconcile;
use crate::core::Context;
use crate::core::Target;
use crate::watch::WatchKey;

/// One primary watch of a controller sharded by context: where, and its key in the registry.
#[derive(Clone)]
pub(super) struct PrimaryWatchKey<C> {
    pub(crate) context: C,
    pub(crate) key: WatchKey,
}

/// The requests of the primaries in the contexts this replica holds, as it gains and loses them: on each
/// change of the held shards, the watches of held contexts are opened (and subscribed once per term), those
/// of contexts no longer held are closed.
pub(super) fn held_contexts<R: Reconcile>(
    engine: Arc<Engine<R>>,
    keys: Vec<PrimaryWatchKey<R::Context>>,
) -> BoxStream<'static, ReconcileKey<R>> {
    let Some(shards) = engine.runtime.shards.clone() else {
        return stream::empty().boxed();
    };
    let held = shards.held();
    // Nothing subscribed yet in this term: the first look subscribes to every held context's watches.
    let subscribed = vec![false; keys.len()];
    let changes = stream::unfold(
        (held, subscribed, true),
        move |(mut held, mut subscribed, first)| {
            let (engine, keys, shards) = (engine.clone(), keys.clone(), shards.clone());
            async move {
                if !first {
                    held.changed().await.ok()?;
                }
                held.borrow_and_update();
                let mut opened = Vec::new();
                for (i, entry) in keys.iter().enumerate() {
                    if !shards.holds_context(entry.context.name()) {
                        close(&engine, entry);
                        subscribed[i] = false;
                    } else if !subscribed[i]
                        && let Some(requests) = open(&engine, entry)
                    {
                        subscribed[i] = true;
                        opened.push(requests);
                    }
                }
                Some((stream::iter(opened), (held, subscribed, false)))
            }
        },
    );
    changes.flatten().flatten_unordered(None).boxed()
}

/// Closes the watches of contexts this replica does not hold (at the end of a term, when no stream of
/// [`held_contexts`] looks any more).
pub(super) fn close_unheld<R: Reconcile>(engine: &Engine<R>, keys: &[PrimaryWatchKey<R::Context>]) {
    let Some(shards) = &engine.runtime.shards else {
        return;
    };
    for entry in keys {
        if !shards.holds_context(entry.context.name()) {
            close(engine, entry);
        }
    }
}

/// Opens (or finds) the watch of `entry`, records it as the controller's cache there, and subscribes.
fn open<R: Reconcile>(
    engine: &Engine<R>,
    entry: &PrimaryWatchKey<R::Context>,
) -> Option<BoxStream<'static, ReconcileKey<R>>> {
    let client = engine.runtime.pool.client(entry.context.name()).ok()?;
    let watch = engine
        .runtime
        .watches
        .watch::<Primary<R>>(entry.key.clone(), client);
    let namespace = entry.key.namespace.clone();
    if !engine.primaries.has(entry.context, namespace.as_deref()) {
        tracing::info!(context = %entry.context.name(), "watching the primaries of a shard now held");
    }
    engine
        .primaries
        .insert((Target::Context(entry.context), namespace), watch.clone());
    let requests = Engine::<R>::keys_from(&watch, Target::Context(entry.context));
    Some(requests.boxed())
}

/// Closes the watch of `entry` if open: out of the controller's caches, out of the registry (its task ends
/// and its cache is freed when the last reconcile holding it ends).
fn close<R: Reconcile>(engine: &Engine<R>, entry: &PrimaryWatchKey<R::Context>) {
    let namespace = entry.key.namespace.as_deref();
    if engine.primaries.remove(entry.context, namespace).is_some() {
        engine.runtime.watches.release(&entry.key);
        tracing::info!(context = %entry.context.name(), "closed the primaries' watch of a shard no longer held");
    }
}
