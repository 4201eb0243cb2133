//! Reconciling one object: read it from the cache, keep the finalizer, run the user's reconcile, then sync
//! its children in every context and record the outcome in its status.

use std::sync::Arc;

use kube::Resource;
use tracing::Instrument;

use crate::children::{self, Parentage};
use crate::controller::Reconcile;
use crate::cx::Cx;
use crate::engine::{Engine, Primary, Request, Verdict};
use crate::error::chain;
use crate::events::Note;
use crate::executor::Next;
use crate::finalize::next_of;
use crate::status::ClusterState;

impl<R: Reconcile> Engine<R> {
    /// Reconciles one request; returns what the executor does next with it.
    pub(crate) async fn reconcile(self: Arc<Self>, request: Request<R>) -> Next {
        let namespace = request.object.namespace.as_deref();
        // Gone from the cache: deleted (the finalizer keeps objects that still have children).
        let Some(object) = self
            .primary_cache(request.context, namespace)
            .and_then(|cache| cache.store().get(&request.object))
        else {
            self.failures().remove(&request);
            return Next::AwaitChange;
        };
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.plan.name(),
            context = %request.context,
            namespace = namespace.unwrap_or(""),
            name = %request.object.name,
        );
        let failures = self.failures().get(&request).copied().unwrap_or(0);
        let cx = Cx::new(
            request.context,
            self.plan.clone(),
            self.runtime.clone(),
            failures,
        );
        let verdict = self.reconcile_object(object, &cx).instrument(span).await;
        match verdict {
            Verdict::Failed(next) => {
                *self.failures().entry(request).or_insert(0) += 1;
                next
            }
            Verdict::Done(next) => {
                self.failures().remove(&request);
                next
            }
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Request<R>, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn reconcile_object(&self, object: Arc<Primary<R>>, cx: &Cx<R::Context>) -> Verdict {
        let context = cx.context();
        let deleting = object.meta().deletion_timestamp.is_some();
        if let Some(finalizer) = &self.finalizer {
            let has_finalizer = object
                .meta()
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == finalizer);
            if deleting {
                return if has_finalizer {
                    Box::pin(self.finalize(object, cx)).await
                } else {
                    Verdict::Done(Next::AwaitChange)
                };
            }
            if !has_finalizer
                && let Err(error) = Box::pin(self.set_finalizer(&object, context, true)).await
            {
                tracing::warn!(context = %context, error = %chain(&error), "adding the finalizer failed");
                return Verdict::Done(Next::RequeueAfter(self.plan.error_requeue_or_default()));
            }
        } else if deleting {
            return Verdict::Done(Next::AwaitChange);
        }

        let action = match self.reconciler.reconcile(object.clone(), cx).await {
            Ok(action) => action,
            Err(error) => {
                let message = chain(&error);
                tracing::warn!(context = %context, error = %message, "reconcile failed");
                if !self.plan.children().is_empty() {
                    Box::pin(self.write_failure(&object, context, &message)).await;
                }
                // Repeats of the same failure become one event series (the recorder's), not one per retry.
                let note = Note {
                    warning: true,
                    reason: "ReconcileFailed",
                    action: "Reconcile",
                    message: &message,
                };
                Box::pin(self.publish(&object, context, note)).await;
                let action = self.reconciler.error_policy(object, &error, cx);
                return Verdict::Failed(next_of(action.requeue_after()));
            }
        };
        let next = next_of(requeue_delay(
            action.requeue_after(),
            self.plan.requeue_delay(),
        ));
        if self.plan.children().is_empty() {
            return Verdict::Done(next);
        }
        let desired = cx.take_children();
        let parent = self.parent_ref(&object, context);
        let link = Parentage {
            parent: &parent,
            controller: self.plan.name(),
            parent_kind: &self.parent_kind,
        };
        // The contexts that answered are recorded without waiting for a hung one's cap (an interim status),
        // and the final status is written over that interim one.
        let written = std::sync::Mutex::new(None);
        let outcomes = Box::pin(self.per_child_context_with_interim(
            |name, client| {
                let desired = desired
                    .iter()
                    .filter(|d| d.context == name)
                    .cloned()
                    .collect();
                let watches: Vec<_> = self.children.iter().filter(|w| w.context == name).collect();
                let link = &link;
                async move { children::sync_context(name, client, desired, &watches, link).await }
            },
            |so_far| {
                let (object, written) = (&object, &written);
                async move {
                    let previous = crate::status_write::owned_status(&**object);
                    let status = self
                        .write_status_over(object, context, &previous, &so_far)
                        .await;
                    *written.lock().unwrap_or_else(|e| e.into_inner()) = status;
                }
            },
        ))
        .await;
        let interim = written.into_inner().unwrap_or_else(|e| e.into_inner());
        for outcome in outcomes
            .values()
            .filter(|o| o.state == ClusterState::Conflict)
        {
            let message = outcome.message.as_deref().unwrap_or_default();
            tracing::warn!(context = %context, %message, "a child's name is taken");
            self.publish(
                &object,
                context,
                Note {
                    warning: true,
                    reason: "ChildConflict",
                    action: "Apply",
                    message,
                },
            )
            .await;
        }
        match interim {
            Some(previous) => {
                Box::pin(self.write_status_over(&object, context, &previous, &outcomes)).await;
            }
            None => Box::pin(self.write_status(&object, context, &outcomes)).await,
        }
        // A context that failed is retried soon, whatever the reconcile asked for.
        if outcomes.values().any(|o| !o.state.is_settled()) {
            let retry = self.plan.error_requeue_or_default();
            return Verdict::Done(Next::RequeueAfter(match next {
                Next::RequeueAfter(n) => n.min(retry),
                Next::AwaitChange => retry,
            }));
        }
        Verdict::Done(next)
    }
}

/// When to reconcile again after a success: the plan's `requeue_after` is a resync period that holds
/// whatever the reconcile returned (`Action::await_change()` included), and a shorter `Action::requeue`
/// comes first.
pub(crate) fn requeue_delay(
    action: Option<std::time::Duration>,
    plan: Option<std::time::Duration>,
) -> Option<std::time::Duration> {
    match (action, plan) {
        (Some(a), Some(p)) => Some(a.min(p)),
        (a, p) => a.or(p),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::requeue_delay;

    #[test]
    fn the_shorter_of_the_actions_requeue_and_the_plans_resync_wins() {
        let (minute, hour) = (Duration::from_secs(60), Duration::from_secs(3600));
        assert_eq!(
            requeue_delay(None, Some(hour)),
            Some(hour),
            "await_change: the resync holds"
        );
        assert_eq!(requeue_delay(Some(minute), Some(hour)), Some(minute));
        assert_eq!(requeue_delay(Some(hour), Some(minute)), Some(minute));
        assert_eq!(requeue_delay(Some(hour), None), Some(hour));
        assert_eq!(requeue_delay(None, None), None);
    }
}
