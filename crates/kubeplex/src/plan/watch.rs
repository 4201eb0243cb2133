//! A kind a controller watches without reconciling or owning it, where, and which parents its changes
//! concern.

use std::any::TypeId;
use std::borrow::Cow;
use std::sync::Arc;

use kube::Client;
use kube::core::ApiResource;

use super::child::expand_namespaces;
use crate::core::{ApiScope, Cluster, Context, PrimaryResource, kind_label};
use crate::watch::{InputPlace, InputWatch, MapFn, WatchRegistry, open_input};

/// Opens the typed watch of a watched kind at a place, with its map function; chosen where the types are
/// known.
type OpenInput<C> =
    Arc<dyn Fn(&WatchRegistry, &InputPlace<'_, C>, Client) -> Arc<dyn InputWatch> + Send + Sync>;

/// A kind a controller watches without reconciling or owning it — Nodes, a shared ConfigMap, another
/// operator's objects — in typed contexts, in every member, or both (the attribute's
/// `watches(Kind, contexts = [..], members, map = path::to::fn)`).
///
/// Each change of an object of the kind — applied, deleted, or added or dropped by a relist — is handed
/// to the map function with the cluster it came from and whether it is gone; the parents it returns are
/// reconciled (each wherever the controller's caches hold it). Without a map function every parent of the
/// controller is reconciled, coalesced: a storm of changes costs one reconcile per parent. The watch is
/// shared with any other watch of the kind with the same namespace and selectors, counts in the cluster's
/// readiness, and its cache is read with [`Cx::cached`](crate::Cx::cached).
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Node};
/// use kube::runtime::reflector::ObjectRef;
/// use kubeplex::{Cluster, ContextName, Plan, plan::Watch};
///
/// // Each Node is labelled with the parent that placed work on it.
/// fn placed_by(node: &Node, _: &Cluster<ContextName>, _gone: bool) -> Vec<ObjectRef<ConfigMap>> {
///     let labels = node.metadata.labels.as_ref();
///     let parent = labels.and_then(|l| l.get("example.com/placed-by"));
///     parent.map(|name| ObjectRef::new(name).within("crds")).into_iter().collect()
/// }
///
/// let plan = Plan::<ContextName>::new("placement")
///     .with_contexts([ContextName::new("control")])
///     .watches(Watch::mapped(placed_by).with_contexts([ContextName::new("cluster-a")]).members());
/// assert_eq!(plan.watched()[0].resource().kind, "Node");
/// assert_eq!(plan.problem(), None);
/// ```
#[derive(Clone)]
pub struct Watch<C> {
    resource: ApiResource,
    namespaced: bool,
    contexts: Vec<C>,
    members: bool,
    /// `None`: every namespace.
    pub(super) namespaces: Option<Vec<Cow<'static, str>>>,
    label_selector: Option<Cow<'static, str>>,
    field_selector: Option<Cow<'static, str>>,
    open: OpenInput<C>,
    /// The map function's parent kind: its type, checked against the controller's, and its name.
    parent: Option<(TypeId, String)>,
}

impl<C: Context> Watch<C> {
    /// Objects of kind `K`, each change reconciling every parent of the controller (the "global input"
    /// case), in no cluster yet.
    pub fn of<K: PrimaryResource>() -> Self {
        Self::new::<K>(
            Arc::new(|registry, place, client| {
                open_input::<K, C, K>(registry, place, client, None)
            }),
            None,
        )
    }

    /// Objects of the kind `map` takes, each change reconciling the parents `map` returns, in no cluster
    /// yet. `P` is the controller's primary kind (the manager refuses to start otherwise).
    pub fn mapped<K, P>(map: MapFn<K, C, P>) -> Self
    where
        K: PrimaryResource,
        P: kube::Resource<DynamicType = ()> + 'static,
    {
        let parent = (TypeId::of::<P>(), kind_label::<P>());
        Self::new::<K>(
            Arc::new(move |registry, place, client| {
                open_input::<K, C, P>(registry, place, client, Some(map))
            }),
            Some(parent),
        )
    }

    fn new<K: PrimaryResource>(open: OpenInput<C>, parent: Option<(TypeId, String)>) -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            namespaced: <K::Scope as ApiScope>::NAMESPACED,
            contexts: Vec::new(),
            members: false,
            namespaces: None,
            label_selector: None,
            field_selector: None,
            open,
            parent,
        }
    }

    /// Watches the kind in these contexts.
    #[must_use]
    pub fn with_contexts(mut self, contexts: impl IntoIterator<Item = C>) -> Self {
        self.contexts.extend(contexts);
        self
    }

    /// Watches the kind in every member of the fleet too: each member that joins is watched, in the same
    /// namespaces, until it leaves.
    #[must_use]
    pub fn members(mut self) -> Self {
        self.members = true;
        self
    }

    /// Whether the kind is also watched in every member.
    pub fn in_members(&self) -> bool {
        self.members
    }

    /// Watches the kind in these namespaces only, replacing those named before; the rules are those of
    /// [`Plan::with_namespaces`](crate::Plan::with_namespaces).
    #[must_use]
    pub fn with_namespaces<S: Into<Cow<'static, str>>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// Watches only objects whose labels match `selector`.
    #[must_use]
    pub fn with_label_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watches only objects whose fields match `selector`.
    #[must_use]
    pub fn with_field_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// The kind's group, version, kind and plural.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// Whether objects of the kind live in a namespace.
    pub fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    /// The contexts the kind is watched in (set by [`with_contexts`](Self::with_contexts)).
    pub fn contexts(&self) -> &[C] {
        &self.contexts
    }

    /// The namespaces the kind is watched in; empty means all namespaces.
    pub fn namespaces(&self) -> &[Cow<'static, str>] {
        self.namespaces.as_deref().unwrap_or_default()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// Whether the kind is watched in `cluster`: one of its contexts, or any member when it is watched in
    /// members.
    pub fn is_watched_in(&self, cluster: &Cluster<C>) -> bool {
        match cluster {
            Cluster::Context(context) => self.contexts.contains(context),
            Cluster::Member(_) => self.members,
        }
    }

    /// Whether changes are mapped to parents (`false`: every parent is reconciled).
    pub fn is_mapped(&self) -> bool {
        self.parent.is_some()
    }

    /// The map function's parent kind, as `Kind.group/version`, and its type.
    pub(crate) fn parent(&self) -> Option<&(TypeId, String)> {
        self.parent.as_ref()
    }

    /// Opens (or joins) the watch in `cluster`, one per namespace.
    pub(crate) fn open(
        &self,
        registry: &WatchRegistry,
        cluster: &Cluster<C>,
        client: &Client,
    ) -> Vec<Arc<dyn InputWatch>> {
        let namespaces = if self.namespaced {
            expand_namespaces(self.namespaces()).collect()
        } else {
            vec![None]
        };
        namespaces
            .into_iter()
            .map(|namespace| {
                let place = InputPlace {
                    cluster,
                    namespace,
                    label_selector: self.label_selector(),
                    field_selector: self.field_selector(),
                };
                (self.open)(registry, &place, client.clone())
            })
            .collect()
    }
}

impl<C: std::fmt::Debug> std::fmt::Debug for Watch<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("kind", &self.resource.kind)
            .field("contexts", &self.contexts)
            .field("members", &self.members)
            .field("namespaces", &self.namespaces)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("mapped_to", &self.parent.as_ref().map(|(_, name)| name))
            .finish()
    }
}
