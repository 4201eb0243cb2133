//! A controller as the manager holds it: its reconciler and its plan, generated and adjusted to run-time
//! configuration once, at registration; its type erased behind what the manager asks of it.

use std::sync::Arc;

use indexmap::IndexSet;
use kube::Resource;
use tokio::sync::watch;

use crate::controller::{Erased, Reconcile};
use crate::core::Context;
use crate::core::{ApiScope, kind_label};
use crate::core::{Error, Grant, Result};
use crate::plan::{Plan, cluster_scoped};
use crate::runtime::Runtime;

/// A controller the manager runs, with its type erased.
pub(super) trait Registration: Send {
    /// The controller's name.
    fn name(&self) -> String;
    /// Whether its plan can work.
    fn check(&self) -> Result<()>;
    /// The names of every context it needs.
    fn contexts(&self) -> Vec<String>;
    /// The names of the contexts its primaries live in.
    fn primary_contexts(&self) -> Vec<String>;
    /// Whether its primaries are also watched in every member of the fleet.
    fn primaries_in_members(&self) -> bool;
    /// Whether it works in the members of the fleet at all (primaries, children or watched kinds).
    fn works_in_members(&self) -> bool;
    /// Every permission it needs, where.
    fn grants(&self) -> Vec<Grant>;
    /// Opens its watches and returns its loop.
    fn start(
        self: Box<Self>,
        runtime: Arc<Runtime>,
        stop: watch::Receiver<bool>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The contexts the primaries of `registrations` live in, each once, in the order first declared.
pub(super) fn primary_contexts(registrations: &[Box<dyn Registration>]) -> Vec<String> {
    let all: IndexSet<String> = (registrations.iter())
        .flat_map(|r| r.primary_contexts())
        .collect();
    all.into_iter().collect()
}

/// A reconciler with the plan it runs: `R::plan()`, as the registration adjusted it.
pub(super) struct Registered<R: Reconcile> {
    reconciler: R,
    plan: Plan<R::Context>,
}

impl<R: Reconcile> Registered<R> {
    /// Registers `reconciler` with its generated plan passed through `configure`, once.
    pub(crate) fn new(
        reconciler: R,
        configure: impl FnOnce(Plan<R::Context>) -> Plan<R::Context>,
    ) -> Self {
        Self {
            plan: configure(R::plan()),
            reconciler,
        }
    }
}

impl<R: Reconcile> Registration for Registered<R> {
    fn name(&self) -> String {
        self.plan.name().to_owned()
    }

    fn check(&self) -> Result<()> {
        let namespaced = <<R::Resource as Resource>::Scope as ApiScope>::NAMESPACED;
        let scope = (!namespaced && !self.plan.namespaces().is_empty())
            .then(|| cluster_scoped(&kind_label::<R::Resource>()));
        // A map function's parent kind is checked here, where the controller's is known.
        let primary = std::any::TypeId::of::<R::Resource>();
        let strays = (self.plan.watched().iter()).filter_map(|w| {
            let (_, name) = w.parent().filter(|(parent, _)| *parent != primary)?;
            Some(format!(
                "watches({}): its map function returns parents of kind `{name}`, but this controller \
                 reconciles `{}`; return `ObjectRef<{}>`",
                crate::core::format_kind(&w.resource().kind, &w.resource().group, &w.resource().version),
                kind_label::<R::Resource>(),
                R::Resource::kind(&()),
            ))
        });
        let problems: Vec<String> = (scope.into_iter())
            .chain(strays)
            .chain(self.plan.problem())
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidPlan {
            controller: self.plan.name().to_owned(),
            reason: problems.join("; "),
        })
    }

    fn contexts(&self) -> Vec<String> {
        self.plan
            .all_contexts()
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }

    fn primary_contexts(&self) -> Vec<String> {
        let contexts = self.plan.contexts().iter();
        contexts.map(|c| c.name().to_owned()).collect()
    }

    fn primaries_in_members(&self) -> bool {
        self.plan.in_members()
    }

    fn works_in_members(&self) -> bool {
        self.plan.works_in_members()
    }

    fn grants(&self) -> Vec<Grant> {
        let namespaced = <<R::Resource as Resource>::Scope as ApiScope>::NAMESPACED;
        let primary = kube::core::ApiResource::erase::<R::Resource>(&());
        self.plan.grants(&primary, namespaced)
    }

    fn start(
        self: Box<Self>,
        runtime: Arc<Runtime>,
        stop: watch::Receiver<bool>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let Self { reconciler, plan } = *self;
        let reconciler: Erased<R::Resource, R::Context> = Box::new(reconciler);
        Box::pin(crate::engine::start_controller(
            reconciler, plan, runtime, stop,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;
    use crate::controller::{Controller, Cx};
    use crate::core::{Action, ContextName};
    use crate::manager::Manager;

    /// A controller of `K` in `control`, every namespace.
    struct Watching<K>(std::marker::PhantomData<K>);

    impl<K: crate::core::PrimaryResource> Controller for Watching<K> {
        type Resource = K;
        type Context = ContextName;
        fn plan() -> Plan<ContextName> {
            Plan::new("watching").with_contexts([ContextName::new("control")])
        }
    }

    impl<K: crate::core::PrimaryResource> Reconcile for Watching<K> {
        type Error = Infallible;
        async fn reconcile(&self, _: Arc<K>, _: &Cx<ContextName>) -> Result<Action, Infallible> {
            Ok(Action::await_change())
        }
    }

    fn watching<K>() -> Watching<K> {
        Watching(std::marker::PhantomData)
    }

    #[test]
    fn the_plan_is_configured_once_and_kept() {
        let mut calls = 0;
        let registered = Registered::new(watching::<ConfigMap>(), |plan| {
            calls += 1;
            plan.with_namespaces(["team-a".to_owned()])
        });
        assert_eq!(calls, 1);
        assert_eq!(registered.plan.namespaces(), ["team-a"]);
        assert_eq!(registered.name(), "watching");
        assert_eq!(registered.contexts(), ["control"]);
        assert!(registered.check().is_ok());
    }

    #[tokio::test]
    async fn run_time_values_are_checked_when_the_manager_starts() {
        let started = Manager::with_kubeconfig(Default::default())
            .controller_with(watching::<ConfigMap>(), |plan| {
                plan.with_namespaces(["Bad_NS"])
            })
            .start()
            .await;
        let Err(Error::InvalidPlan { controller, reason }) = started else {
            panic!("a bad namespace was accepted");
        };
        assert_eq!(controller, "watching");
        assert!(
            reason.starts_with("invalid namespace \"Bad_NS\": it contains 'B' (lowercase it)"),
            "{reason}"
        );
        // A cluster-scoped primary has no namespace to be watched in.
        let registered =
            Registered::new(watching::<Namespace>(), |plan| plan.with_namespaces(["x"]));
        let reason = registered.check().unwrap_err().to_string();
        assert_eq!(
            reason,
            "controller watching: `Namespace/v1` is cluster-scoped, so it cannot be watched or owned \
             in `namespaces`: a cluster-scoped kind is watched and owned across the whole cluster"
        );
        assert!(
            Registered::new(watching::<Namespace>(), |plan| plan)
                .check()
                .is_ok()
        );
    }

    /// A map to Secrets: not the parents of a controller of ConfigMaps.
    fn to_secrets(
        _: &Namespace,
        _: &crate::core::Cluster<ContextName>,
        _: bool,
    ) -> Vec<kube::runtime::reflector::ObjectRef<k8s_openapi::api::core::v1::Secret>> {
        Vec::new()
    }

    /// A map to ConfigMaps.
    fn to_configs(
        _: &Namespace,
        _: &crate::core::Cluster<ContextName>,
        _: bool,
    ) -> Vec<kube::runtime::reflector::ObjectRef<ConfigMap>> {
        Vec::new()
    }

    #[test]
    fn a_map_function_must_return_the_controllers_own_parents() {
        use crate::plan::Watch;
        let place = [ContextName::new("control")];
        let stray = Registered::new(watching::<ConfigMap>(), |plan| {
            plan.watches(Watch::mapped(to_secrets).with_contexts(place))
        });
        assert_eq!(
            stray.check().unwrap_err().to_string(),
            "controller watching: watches(Namespace/v1): its map function returns parents of kind \
             `Secret/v1`, but this controller reconciles `ConfigMap/v1`; return `ObjectRef<ConfigMap>`"
        );
        let own = Registered::new(watching::<ConfigMap>(), |plan| {
            plan.watches(Watch::mapped(to_configs).with_contexts(place))
        });
        assert!(own.check().is_ok());
    }
}
