//! What a reconcile sees besides its object: where it came from and how to reach every context.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::ApiResource;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};
use serde::Serialize;

use crate::children::DesiredChild;
use crate::context::Context;
use crate::controller::{DEFAULT_ERROR_REQUEUE, MAX_ERROR_REQUEUE, PrimaryResource};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::runtime::Runtime;

/// The reconcile context: the context the object came from, access to every declared context, and the
/// children the reconcile wants.
pub struct Cx<C> {
    context: C,
    plan: Arc<Plan<C>>,
    runtime: Arc<Runtime>,
    desired: Mutex<Vec<DesiredChild>>,
    failures: u32,
}

impl<C: Context> Cx<C> {
    pub(crate) fn new(
        context: C,
        plan: Arc<Plan<C>>,
        runtime: Arc<Runtime>,
        failures: u32,
    ) -> Self {
        Self {
            context,
            plan,
            runtime,
            desired: Mutex::default(),
            failures,
        }
    }

    /// The context the reconciled object came from.
    pub fn context(&self) -> C {
        self.context
    }

    /// The name of the controller running this reconcile.
    pub fn controller(&self) -> &str {
        self.plan.name()
    }

    /// The client of any context the manager's controllers declared.
    pub fn client(&self, context: C) -> Result<Client> {
        self.runtime.pool.client(context.name())
    }

    /// An `Api` for a namespaced kind in `namespace` of `context`.
    pub fn api<K>(&self, context: C, namespace: &str) -> Result<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Ok(Api::namespaced(self.client(context)?, namespace))
    }

    /// Every cached object of kind `K` in `context`, from the watches the controllers opened there
    /// (empty when none watches `K` there). Reading the cache costs no request.
    pub fn cached<K: PrimaryResource>(&self, context: C) -> Vec<Arc<K>> {
        self.runtime
            .watches
            .watches_of::<K>(context.name())
            .iter()
            .flat_map(|w| w.store().state())
            .collect()
    }

    /// Declares a child the object should have in `context`.
    ///
    /// After the reconcile succeeds, the runtime applies every declared child (server-side apply, the
    /// controller as field manager), stamps each with a reference to its parent (labels and annotations,
    /// never an ownerReference across clusters), deletes the parent's children that were not declared this
    /// time, and records the outcome per context in the parent's status. Each context is synced on its own:
    /// an unreachable one never holds back the others.
    ///
    /// Fails when the kind is not declared with `owns(..)` for `context`, or its namespace is not one of
    /// the declared namespaces, or the child has no name.
    pub fn child<K>(&self, context: C, child: K) -> Result<()>
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let resource = ApiResource::erase::<K>(&());
        let invalid = |reason: String| Error::InvalidChild {
            context: context.name().to_owned(),
            kind: resource.kind.clone(),
            reason,
        };
        let declared = self
            .plan
            .children()
            .iter()
            .find(|c| c.resource() == &resource && c.context_list().contains(&context))
            .ok_or_else(|| {
                invalid(format!(
                    "controller {} declares no owns({}) in this context",
                    self.controller(),
                    resource.kind
                ))
            })?;
        let meta = child.meta();
        let name = meta
            .name
            .clone()
            .ok_or_else(|| invalid("the child has no metadata.name".into()))?;
        let namespace = meta.namespace.clone();
        let namespaces = declared.namespace_list();
        if !namespaces.is_empty()
            && !namespaces
                .iter()
                .any(|ns| Some(ns.as_ref()) == namespace.as_deref())
        {
            let list: Vec<&str> = namespaces.iter().map(AsRef::as_ref).collect();
            return Err(invalid(format!(
                "namespace {namespace:?} is not one of the declared {}",
                list.join(", ")
            )));
        }
        if meta
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty())
            && context != self.context
        {
            return Err(invalid(
                "ownerReferences cannot span clusters (the garbage collector would delete the child as an \
                 orphan); kubeplex links the child to its parent itself"
                    .into(),
            ));
        }
        let object =
            serde_json::to_value(&child).map_err(|e| invalid(format!("cannot serialize: {e}")))?;
        let desired = DesiredChild {
            context: context.name().to_owned(),
            resource,
            namespace,
            name,
            object,
        };
        self.desired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(desired);
        Ok(())
    }

    /// How many reconciles of this object failed in a row before this one.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the default error policy waits before a retry: the plan's `error_requeue` (default
    /// [`DEFAULT_ERROR_REQUEUE`]), doubled for each earlier consecutive failure of this object, at most
    /// [`MAX_ERROR_REQUEUE`].
    pub fn error_requeue(&self) -> Duration {
        let base = self
            .plan
            .error_requeue_delay()
            .unwrap_or(DEFAULT_ERROR_REQUEUE);
        base.saturating_mul(1 << self.failures.min(16))
            .min(MAX_ERROR_REQUEUE.max(base))
    }

    /// The children declared so far, taken.
    pub(crate) fn take_children(&self) -> Vec<DesiredChild> {
        std::mem::take(&mut self.desired.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<C: Context> fmt::Debug for Cx<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cx")
            .field("context", &self.context)
            .field("controller", &self.plan.name())
            .finish()
    }
}
