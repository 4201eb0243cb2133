//! A kind of object a controller creates for its primary objects, and where those live.

use std::borrow::Cow;

use kube::core::ApiResource;

use crate::core::Context;
use crate::core::{ApiScope, PrimaryResource};
use crate::core::{DeletePolicy, PrunePolicy};
use crate::core::{HealthRule, builtin_rule};
use crate::watch::{OpenChildWatch, open_child_watch, open_full_child_watch};

/// A kind of object a controller creates for its primary objects, in the contexts and namespaces named.
///
/// Its builders and getters follow [`Plan`](crate::Plan)'s: `with_namespaces` sets, `namespaces` reads.
#[derive(Clone, Debug)]
pub struct Child<C> {
    pub(super) resource: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub(super) namespaced: bool,
    pub(super) contexts: Vec<C>,
    /// Children also live in every member of the fleet (clusters that join at run time).
    pub(super) members: bool,
    /// In each member, children live in the namespace its configuration defaults to, not in `namespaces`.
    pub(super) member_default_namespace: bool,
    /// `None`: every namespace.
    pub(super) namespaces: Option<Vec<Cow<'static, str>>>,
    /// What becomes of a child no longer declared.
    pub(super) prune: PrunePolicy,
    /// What becomes of a child when its parent is deleted.
    pub(super) on_delete: DeletePolicy,
    /// Opens the typed watch of this kind, chosen where the type is known.
    pub(crate) open: OpenChildWatch,
    /// Opens a watch that caches whole objects (see [`Child::cache_objects`]).
    open_full: OpenChildWatch,
    /// Whole objects are cached (see [`Child::cache_objects`]).
    whole: bool,
    /// Judges each child's health: the kind's built-in rule, or the user's.
    pub(crate) health: HealthRule,
    /// Several parents may declare the same child (see [`Child::shared`]).
    shared: bool,
}

impl<C: Context> Child<C> {
    /// Children of kind `K`, in no context yet.
    pub fn of<K: PrimaryResource>() -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            namespaced: <K::Scope as ApiScope>::NAMESPACED,
            contexts: Vec::new(),
            members: false,
            member_default_namespace: false,
            namespaces: None,
            prune: PrunePolicy::Delete,
            on_delete: DeletePolicy::Delete,
            open: open_child_watch::<K>,
            open_full: open_full_child_watch::<K>,
            whole: false,
            health: builtin_rule(&K::group(&()), &K::kind(&())),
            shared: false,
        }
    }

    /// Children of this kind may be shared: several parents of the controller may declare the same object
    /// (a Namespace, a ConfigMap, a CRD), the attribute's `owns(Kind, shared)`. It is created by the first,
    /// records every parent that declares it, is never a conflict between them, and is deleted (or kept,
    /// or orphaned, as its policies say) only when the last one lets go. Parents must declare it alike: one
    /// whose content differs from what the others applied is refused as a conflict. An object created by
    /// someone else stays a conflict (`docs/ownership.md`, "Shared children").
    #[must_use]
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Whether children of this kind may be shared (set by [`shared`](Self::shared)).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Judges the health of children of this kind with `rule` instead of the kind's built-in one (the
    /// attribute's `owns(Kind, health = path::to::rule)`): a function of the child's
    /// [`Projection`](crate::health::Projection) — its metadata, its status' scalar fields and conditions, and the
    /// spec fields in [`SPEC_FIELDS`](crate::health::SPEC_FIELDS) — that says how it is doing and why.
    ///
    /// ```
    /// use kubeplex::{health::Assessment, Child, ContextName, health::Projection};
    ///
    /// fn ready_when_serving(child: &Projection) -> Assessment {
    ///     match child.status_str("phase") {
    ///         Some("Serving") => Assessment::healthy("serving"),
    ///         Some(phase) => Assessment::progressing(format!("phase {phase}")),
    ///         None => Assessment::progressing("no phase yet"),
    ///     }
    /// }
    ///
    /// let child = Child::<ContextName>::of::<k8s_openapi::api::core::v1::ConfigMap>()
    ///     .with_health(ready_when_serving);
    /// # let _ = child;
    /// ```
    #[must_use]
    pub fn with_health(mut self, rule: HealthRule) -> Self {
        self.health = rule;
        self
    }

    /// The rule that judges the health of children of this kind (set by [`with_health`](Self::with_health)).
    pub fn health(&self) -> HealthRule {
        self.health
    }

    /// Caches these children whole (spec and status), so that the reconcile can read them with
    /// [`Cx::cached`](crate::Cx::cached); by default only their metadata is cached, which is all the
    /// runtime needs and a fraction of the memory.
    #[must_use]
    pub fn cache_objects(mut self) -> Self {
        self.open = self.open_full;
        self.whole = true;
        self
    }

    /// Whether these children are cached whole (set by [`cache_objects`](Self::cache_objects)).
    pub fn caches_objects(&self) -> bool {
        self.whole
    }

    /// Children live in these contexts.
    #[must_use]
    pub fn with_contexts(mut self, contexts: impl IntoIterator<Item = C>) -> Self {
        self.contexts.extend(contexts);
        self
    }

    /// Children also live in every member of the fleet: each member that joins gets them, in the same
    /// namespaces (see [`Manager::members`](crate::Manager::members) and docs/fleets.md).
    #[must_use]
    pub fn members(mut self) -> Self {
        self.members = true;
        self
    }

    /// Whether children also live in every member of the fleet.
    pub fn in_members(&self) -> bool {
        self.members
    }

    /// In each member, children live in the member's own namespace: the one its configuration defaults to
    /// (the namespace of a kubeconfig's context; `default` when it names none), instead of the declared
    /// namespaces, which still apply in the contexts. For members whose credentials are scoped to a
    /// namespace of their own, or clusters shared by several members: each member's child watch and
    /// children stay in its namespace. Implies [`members`](Self::members).
    #[must_use]
    pub fn member_default_namespace(mut self) -> Self {
        self.members = true;
        self.member_default_namespace = true;
        self
    }

    /// Whether, in each member, children live in the member's default namespace (set by
    /// [`member_default_namespace`](Self::member_default_namespace)).
    pub fn in_member_default_namespace(&self) -> bool {
        self.member_default_namespace
    }

    /// Children live in these namespaces, replacing those named before; the rules are those of
    /// [`Plan::namespaces`](crate::Plan::namespaces).
    #[must_use]
    pub fn with_namespaces<S: Into<Cow<'static, str>>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// Children may live in every namespace (the default), forgetting those named before.
    #[must_use]
    pub fn all_namespaces(mut self) -> Self {
        self.namespaces = None;
        self
    }

    /// What becomes of a child of this kind that its parent no longer declares (the attribute's
    /// `prune`): deleted (the default), or kept — unlinked and left in place, never deleted by the runtime.
    /// Recorded on each child ([`ON_PRUNE_ANNOTATION`](crate::ownership::ON_PRUNE_ANNOTATION)); one child can be
    /// chosen otherwise with [`ChildOptions`](crate::ChildOptions).
    #[must_use]
    pub fn with_prune(mut self, policy: PrunePolicy) -> Self {
        self.prune = policy;
        self
    }

    /// A child of this kind that its parent no longer declares is kept: unlinked (no longer watched or
    /// owned) and left in place, where the default deletes it; `prune = keep` in the attribute. For
    /// what must outlive a change of the spec: a Namespace whose name comes from the spec, with what others
    /// put in it.
    #[must_use]
    pub fn keep_on_prune(self) -> Self {
        self.with_prune(PrunePolicy::Keep)
    }

    /// What becomes of a child of this kind when its parent is deleted (the attribute's `on_delete`):
    /// deleted, the parent waiting until it is gone (the default), or orphaned — unlinked and left in
    /// place. Recorded on each child ([`ON_DELETE_ANNOTATION`](crate::ownership::ON_DELETE_ANNOTATION)); one child
    /// can be chosen otherwise with [`ChildOptions`](crate::ChildOptions).
    #[must_use]
    pub fn with_on_delete(mut self, policy: DeletePolicy) -> Self {
        self.on_delete = policy;
        self
    }

    /// A child of this kind is left in place, unlinked, when its parent is deleted, where the default
    /// deletes it; `on_delete = orphan` in the attribute.
    #[must_use]
    pub fn orphan_on_delete(self) -> Self {
        self.with_on_delete(DeletePolicy::Orphan)
    }

    /// What becomes of a child no longer declared (set by [`with_prune`](Self::with_prune)).
    pub fn prune(&self) -> PrunePolicy {
        self.prune
    }

    /// What becomes of a child when its parent is deleted (set by [`with_on_delete`](Self::with_on_delete)).
    pub fn on_delete(&self) -> DeletePolicy {
        self.on_delete
    }

    /// The child kind's group, version, kind and plural.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// Whether objects of the kind live in a namespace (`false`: a cluster-scoped kind).
    pub fn is_namespaced(&self) -> bool {
        self.namespaced
    }

    /// The contexts children live in (set by [`with_contexts`](Self::with_contexts)).
    pub fn contexts(&self) -> &[C] {
        &self.contexts
    }

    /// The namespaces children live in (set by [`with_namespaces`](Self::with_namespaces)); empty means all
    /// namespaces.
    pub fn namespaces(&self) -> &[Cow<'static, str>] {
        self.namespaces.as_deref().unwrap_or_default()
    }

    /// The namespaces children are watched in within a member whose configuration defaults to namespace
    /// `default`; `None` is all namespaces.
    pub(crate) fn member_namespaces<'a>(&'a self, default: &'a str) -> Vec<Option<&'a str>> {
        if self.member_default_namespace && self.namespaced {
            return vec![Some(default)];
        }
        expand_namespaces(self.namespaces()).collect()
    }

    /// Every (context, namespace) pair children are watched in; `None` is all namespaces.
    pub fn watches(&self) -> impl Iterator<Item = (C, Option<&str>)> + '_ {
        self.contexts.iter().flat_map(move |&context| {
            expand_namespaces(self.namespaces()).map(move |ns| (context, ns))
        })
    }
}

/// The namespaces to watch: each named one, or a single "all namespaces" when none is named.
pub(super) fn expand_namespaces<'a>(
    namespaces: &'a [Cow<'static, str>],
) -> impl Iterator<Item = Option<&'a str>> {
    let all = namespaces.is_empty().then_some(None);
    namespaces.iter().map(|ns| Some(ns.as_ref())).chain(all)
}
