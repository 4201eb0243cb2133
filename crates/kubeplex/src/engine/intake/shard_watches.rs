//! Sharded by context: a replica watches a context's primaries only while it holds the context's shard,
//! so the primaries' memory is split between the replicas. Gaining a shard opens its watches (their first
//! list queues every parent there); losing it closes them and frees their caches.

use std::sync::Arc;

use crate::controller::DynReconcile;
use crate::core::Cluster;
use crate::core::Context;
use crate::engine::engine::{Engine, Primary, ReconcileKey};
use crate::executor::KeySender;
use crate::watch::WatchKey;

/// One primary watch of a controller sharded by context: where, and its key in the registry.
#[derive(Clone)]
pub(crate) struct PrimaryWatchKey<C> {
    pub(crate) context: C,
    pub(crate) key: WatchKey,
}

/// Follows the shards this replica holds, for a term: on each change (and at once), the watches of held
/// contexts not open yet are opened and send their keys to `keys`; those of contexts no longer held are
/// closed. A watch open since an earlier term was subscribed when the term began.
pub(crate) async fn held_contexts<R: DynReconcile>(
    engine: Arc<Engine<R>>,
    watches: Vec<PrimaryWatchKey<R::Context>>,
    keys: KeySender<ReconcileKey<R>>,
) {
    let Some(shards) = engine.runtime.shards.clone() else {
        return;
    };
    let mut held = shards.held();
    loop {
        held.borrow_and_update();
        for entry in &watches {
            if !shards.holds_context(entry.context.name()) {
                close(&engine, entry);
            } else if !engine
                .primaries
                .has(entry.context, entry.key.namespace.as_deref())
            {
                open(&engine, entry, &keys);
            }
        }
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// Closes the watches of contexts this replica does not hold (at the end of a term, when no stream of
/// [`held_contexts`] looks any more).
pub(crate) fn close_unheld<R: DynReconcile>(
    engine: &Engine<R>,
    keys: &[PrimaryWatchKey<R::Context>],
) {
    let Some(shards) = &engine.runtime.shards else {
        return;
    };
    for entry in keys {
        if !shards.holds_context(entry.context.name()) {
            close(engine, entry);
        }
    }
}

/// Opens (or finds) the watch of `entry`, records it as the controller's cache there, and sends its keys
/// to `keys`.
fn open<R: DynReconcile>(
    engine: &Engine<R>,
    entry: &PrimaryWatchKey<R::Context>,
    keys: &KeySender<ReconcileKey<R>>,
) {
    let Ok(client) = engine.runtime.pool.client(entry.context.name()) else {
        return;
    };
    let watch = engine
        .runtime
        .watches
        .watch::<Primary<R>>(entry.key.clone(), client);
    let namespace = entry.key.namespace.clone();
    tracing::info!(cluster = %entry.context.name(), "watching the primaries of a shard now held");
    engine
        .primaries
        .insert((Cluster::Context(entry.context), namespace), watch.clone());
    Engine::<R>::follow_primaries(&watch, Cluster::Context(entry.context), keys.clone());
}

/// Closes the watch of `entry` if open: out of the controller's caches, out of the registry (its task ends
/// and its cache is freed when the last reconcile holding it ends).
fn close<R: DynReconcile>(engine: &Engine<R>, entry: &PrimaryWatchKey<R::Context>) {
    let namespace = entry.key.namespace.as_deref();
    if engine.primaries.remove(entry.context, namespace).is_some() {
        engine.runtime.watches.release(&entry.key);
        tracing::info!(cluster = %entry.context.name(), "closed the primaries' watch of a shard no longer held");
    }
}
