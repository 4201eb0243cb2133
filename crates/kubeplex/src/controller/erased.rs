//! A reconciler as the engine holds it: its type erased but for its resource and context.
//!
//! The engine is generic code of some size, and a type parameter per controller would compile a copy of it
//! for every controller a program registers. Behind [`Erased`] it is compiled once per (resource, context)
//! pair: a program with many controllers of one kind builds one engine, at the cost of a box per reconcile.

use std::sync::Arc;

use futures::TryFutureExt;
use futures::future::BoxFuture;

use super::controller::{Controller, Reconcile};
use super::cx::Cx;
use crate::core::{Action, Context, PrimaryResource};

/// What a reconcile or a cleanup failed with: the reconciler's own error, boxed.
pub(crate) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// A reconciler of `K` in contexts `C`, whatever its type.
pub(crate) type Erased<K, C> = Box<dyn DynReconcile<Resource = K, Context = C>>;

/// [`Reconcile`] as the engine calls it: futures boxed and errors a [`Failure`], so that it can be a trait
/// object. Every reconciler is one.
pub(crate) trait DynReconcile: Send + Sync + 'static {
    type Resource: PrimaryResource;
    type Context: Context;

    /// [`Reconcile::reconcile`].
    fn reconcile<'a>(
        &'a self,
        object: Arc<Self::Resource>,
        cx: &'a Cx<Self::Context>,
    ) -> BoxFuture<'a, Result<Action, Failure>>;

    /// [`Reconcile::error_policy`], given what `reconcile` or `cleanup` failed with.
    fn error_policy(
        &self,
        object: Arc<Self::Resource>,
        error: &Failure,
        cx: &Cx<Self::Context>,
    ) -> Action;

    /// [`Reconcile::cleanup`].
    fn cleanup<'a>(
        &'a self,
        object: Arc<Self::Resource>,
        cx: &'a Cx<Self::Context>,
    ) -> BoxFuture<'a, Result<(), Failure>>;
}

impl<R: Reconcile> DynReconcile for R {
    type Resource = <R as Controller>::Resource;
    type Context = <R as Controller>::Context;

    fn reconcile<'a>(
        &'a self,
        object: Arc<Self::Resource>,
        cx: &'a Cx<Self::Context>,
    ) -> BoxFuture<'a, Result<Action, Failure>> {
        Box::pin(Reconcile::reconcile(self, object, cx).map_err(Failure::from))
    }

    fn error_policy(
        &self,
        object: Arc<Self::Resource>,
        error: &Failure,
        cx: &Cx<Self::Context>,
    ) -> Action {
        match error.downcast_ref::<R::Error>() {
            Some(error) => Reconcile::error_policy(self, object, error, cx),
            // Not reached: every failure of this reconciler is its own error, boxed here.
            None => Action::requeue(cx.error_requeue()),
        }
    }

    fn cleanup<'a>(
        &'a self,
        object: Arc<Self::Resource>,
        cx: &'a Cx<Self::Context>,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(Reconcile::cleanup(self, object, cx).map_err(Failure::from))
    }
}

/// The engine of every controller of `K` in `C` holds one of these.
impl<K: PrimaryResource, C: Context> DynReconcile for Erased<K, C> {
    type Resource = K;
    type Context = C;

    fn reconcile<'a>(
        &'a self,
        object: Arc<K>,
        cx: &'a Cx<C>,
    ) -> BoxFuture<'a, Result<Action, Failure>> {
        (**self).reconcile(object, cx)
    }

    fn error_policy(&self, object: Arc<K>, error: &Failure, cx: &Cx<C>) -> Action {
        (**self).error_policy(object, error, cx)
    }

    fn cleanup<'a>(&'a self, object: Arc<K>, cx: &'a Cx<C>) -> BoxFuture<'a, Result<(), Failure>> {
        (**self).cleanup(object, cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::controller::test_controller::{CONTROL, cx};
    use crate::core::ContextName;

    /// How long [`Picky`]'s error policy waits: not the default policy's wait.
    const ITS_OWN_WAIT: Duration = Duration::from_secs(1234);

    #[derive(Debug, thiserror::Error)]
    #[error("picky: {0}")]
    struct PickyError(&'static str);

    /// Fails every reconcile and cleanup, and has an error policy of its own.
    struct Picky;

    impl Controller for Picky {
        type Resource = ConfigMap;
        type Context = ContextName;
        fn plan() -> crate::plan::Plan<ContextName> {
            crate::plan::Plan::new("picky").with_contexts([CONTROL])
        }
    }

    impl Reconcile for Picky {
        type Error = PickyError;

        async fn reconcile(
            &self,
            _: Arc<ConfigMap>,
            _: &Cx<ContextName>,
        ) -> Result<Action, PickyError> {
            Err(PickyError("no reconcile"))
        }

        fn error_policy(
            &self,
            _: Arc<ConfigMap>,
            error: &PickyError,
            _: &Cx<ContextName>,
        ) -> Action {
            assert_eq!(error.0.split(' ').next(), Some("no"));
            Action::requeue(ITS_OWN_WAIT)
        }

        async fn cleanup(&self, _: Arc<ConfigMap>, _: &Cx<ContextName>) -> Result<(), PickyError> {
            Err(PickyError("no cleanup"))
        }
    }

    #[tokio::test]
    async fn an_erased_reconciler_fails_with_its_own_error_and_its_policy_reads_it() {
        let erased: Erased<ConfigMap, ContextName> = Box::new(Picky);
        let (cx, object) = (cx(CONTROL, 0), Arc::new(ConfigMap::default()));
        let failed = erased.reconcile(object.clone(), &cx).await.unwrap_err();
        assert_eq!(failed.to_string(), "picky: no reconcile");
        assert!(
            failed.downcast_ref::<PickyError>().is_some(),
            "the error itself, not a wrapper"
        );
        assert_eq!(
            erased.error_policy(object.clone(), &failed, &cx),
            Action::requeue(ITS_OWN_WAIT)
        );
        let failed = erased.cleanup(object.clone(), &cx).await.unwrap_err();
        assert_eq!(failed.to_string(), "picky: no cleanup");
        assert_eq!(
            erased.error_policy(object, &failed, &cx),
            Action::requeue(ITS_OWN_WAIT)
        );
    }

    #[tokio::test]
    async fn an_error_not_its_own_gets_the_default_policy() {
        let erased: Erased<ConfigMap, ContextName> = Box::new(Picky);
        let cx = cx(CONTROL, 0);
        let other: Failure = "another error".into();
        assert_eq!(
            erased.error_policy(Arc::new(ConfigMap::default()), &other, &cx),
            Action::requeue(cx.error_requeue())
        );
    }
}
