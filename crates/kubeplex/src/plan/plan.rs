//! What a controller watches and where: the description `#[controller]` generates.

use std::borrow::Cow;
use std::time::Duration;

use kube::core::ApiResource;

use crate::core::Context;
use crate::core::{PrimaryResource, format_kind};

use super::child::Child;
use super::dispatch::Dispatch;
use super::watch::Watch;

/// The longest the default error policy waits between retries of an object that keeps failing.
pub const MAX_ERROR_REQUEUE: Duration = Duration::from_secs(300);

/// How long a failed reconcile waits before it is retried when the plan sets no `error_requeue`.
pub const DEFAULT_ERROR_REQUEUE: Duration = Duration::from_secs(5);

/// How long a change of a child's health waits at most before its parent is reconciled, when the plan
/// sets no `health_debounce`.
pub const DEFAULT_HEALTH_DEBOUNCE: Duration = Duration::from_secs(1);

/// The longest a controller name may be: it is a label value on every child (63 characters at most).
pub const MAX_CONTROLLER_NAME: usize = kubeplex_names::MAX_CONTROLLER_NAME;

/// Where a controller's primary resource is watched, where its children live, and how it reconciles.
///
/// `#[controller]` builds one from its attribute; it can also be written by hand with the builder methods,
/// and the builders adjust a generated one to run-time configuration
/// ([`Manager::controller_with`](crate::Manager::controller_with)).
///
/// A value is set by `with_` and the attribute key's name and read by the key's name alone
/// ([`with_label_selector`](Self::with_label_selector) sets, [`label_selector`](Self::label_selector) reads).
/// The one flag, [`members`](Self::members), reads as [`in_members`](Self::in_members).
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kubeplex::{Child, ContextName, Plan};
///
/// let generated = Plan::new("web").with_contexts([ContextName::new("control")]).with_namespaces(["crds"]).owns(
///     Child::of::<Deployment>().with_contexts([ContextName::new("cluster-a")]).with_namespaces(["apps"]),
/// );
/// // Values from flags replace the attribute's; they are checked when the manager starts.
/// let (namespace, children) = ("team-a".to_owned(), vec!["x".to_owned(), "y".to_owned()]);
/// let plan = generated.with_namespaces([namespace]).child_namespaces::<Deployment>(children);
/// assert_eq!(plan.namespaces(), ["team-a"]);
/// assert_eq!(plan.problem(), None);
/// assert!(plan.with_namespaces(["Team-A"]).problem().unwrap().starts_with(r#"invalid namespace "Team-A""#));
/// ```
#[derive(Clone, Debug)]
pub struct Plan<C> {
    pub(super) name: Cow<'static, str>,
    pub(super) contexts: Vec<C>,
    /// The primary resource is also watched in every member of the fleet.
    pub(super) members: bool,
    /// `None`: every namespace.
    pub(super) namespaces: Option<Vec<Cow<'static, str>>>,
    pub(super) label_selector: Option<Cow<'static, str>>,
    pub(super) field_selector: Option<Cow<'static, str>>,
    pub(super) concurrency: Option<u16>,
    pub(super) concurrency_per_cluster: Option<u16>,
    pub(super) dispatch: Dispatch,
    pub(super) debounce: Option<Duration>,
    pub(super) health_debounce: Option<Duration>,
    pub(super) requeue_after: Option<Duration>,
    pub(super) error_requeue: Option<Duration>,
    pub(super) finalizer: Option<Cow<'static, str>>,
    pub(super) abandon_unreachable_after: Option<Duration>,
    pub(super) abandon_terminating_after: Option<Duration>,
    pub(super) children: Vec<Child<C>>,
    /// Kinds watched without being reconciled or owned.
    pub(super) watches: Vec<Watch<C>>,
    /// Parents are not reconciled when a cluster's readiness flips.
    pub(super) ignore_readiness_flips: bool,
    /// Kinds `child_namespaces` was given that the plan does not own (a problem, reported at start).
    pub(super) unowned: Vec<String>,
}

impl<C: Context> Plan<C> {
    /// A plan for the controller called `name`, watching nothing yet.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self {
            name: name.into(),
            contexts: Vec::new(),
            members: false,
            namespaces: None,
            label_selector: None,
            field_selector: None,
            concurrency: None,
            concurrency_per_cluster: None,
            dispatch: Dispatch::Fair,
            debounce: None,
            health_debounce: None,
            requeue_after: None,
            error_requeue: None,
            finalizer: None,
            abandon_unreachable_after: None,
            abandon_terminating_after: None,
            children: Vec::new(),
            watches: Vec::new(),
            ignore_readiness_flips: false,
            unowned: Vec::new(),
        }
    }

    /// Watches the primary resource in these contexts.
    #[must_use]
    pub fn with_contexts(mut self, contexts: impl IntoIterator<Item = C>) -> Self {
        self.contexts.extend(contexts);
        self
    }

    /// Watches the primary resource in every member of the fleet too, in the same namespaces: each member
    /// that joins has its objects reconciled, and [`Cx::cluster`](crate::Cx::cluster) says which member an
    /// object came from (docs/fleets.md).
    #[must_use]
    pub fn members(mut self) -> Self {
        self.members = true;
        self
    }

    /// Whether the primary resource is also watched in every member of the fleet.
    pub fn in_members(&self) -> bool {
        self.members
    }

    /// A cluster that stops answering, or answers again, does not reconcile this controller's parents (the
    /// attribute's `ignore_readiness_flips`): their status says so at their next reconcile only. By default
    /// every parent is reconciled on such a flip of a cluster the controller works in.
    #[must_use]
    pub fn ignore_readiness_flips(mut self) -> Self {
        self.ignore_readiness_flips = true;
        self
    }

    /// Whether a flip of a cluster's readiness reconciles the parents (see
    /// [`ignore_readiness_flips`](Self::ignore_readiness_flips)).
    pub fn follows_readiness_flips(&self) -> bool {
        !self.ignore_readiness_flips
    }

    /// Watches the primary resource in these namespaces only, replacing those named before (the
    /// attribute's `namespaces`, in a plan adjusted with
    /// [`Manager::controller_with`](crate::Manager::controller_with)). Each must be a DNS-1123 label, listed
    /// once, and the list must not be empty; [`problem`](Self::problem) says what is wrong.
    #[must_use]
    pub fn with_namespaces<S: Into<Cow<'static, str>>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// Watches the primary resource in every namespace (the default), forgetting those named before.
    #[must_use]
    pub fn all_namespaces(mut self) -> Self {
        self.namespaces = None;
        self
    }

    /// Watches only objects matching this label selector.
    #[must_use]
    pub fn with_label_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watches only objects matching this field selector.
    #[must_use]
    pub fn with_field_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Runs at most this many reconciles at once (unbounded when not set).
    #[must_use]
    pub fn with_concurrency(mut self, limit: u16) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// Runs at most this many reconciles of objects from one cluster at once, so that one busy
    /// cluster cannot take every run ([`concurrency`](Self::concurrency) still bounds the total). Needs
    /// [`Dispatch::Fair`], the default.
    #[must_use]
    pub fn with_concurrency_per_cluster(mut self, limit: u16) -> Self {
        self.concurrency_per_cluster = Some(limit);
        self
    }

    /// How due reconciles take turns between clusters: [`Dispatch::Fair`] (the default) or
    /// [`Dispatch::Fifo`].
    #[must_use]
    pub fn with_dispatch(mut self, dispatch: Dispatch) -> Self {
        self.dispatch = dispatch;
        self
    }

    /// Waits this long after an event for further events on the same object before reconciling.
    #[must_use]
    pub fn with_debounce(mut self, delay: Duration) -> Self {
        self.debounce = Some(delay);
        self
    }

    /// How long a change of a child's health may wait before its parent is reconciled (default
    /// [`DEFAULT_HEALTH_DEBOUNCE`]): the changes within it make one reconcile and at most one status
    /// write, so a rolling update does not write the parent on every pod; unlike
    /// [`debounce`](Self::debounce), a stream of changes does not push it back.
    #[must_use]
    pub fn with_health_debounce(mut self, delay: Duration) -> Self {
        self.health_debounce = Some(delay);
        self
    }

    /// How long a change of a child's health may wait (set by [`with_health_debounce`](Self::with_health_debounce),
    /// else [`DEFAULT_HEALTH_DEBOUNCE`]).
    pub fn health_debounce(&self) -> Duration {
        self.health_debounce.unwrap_or(DEFAULT_HEALTH_DEBOUNCE)
    }

    /// Reconciles every object again this long after its last successful reconcile.
    #[must_use]
    pub fn with_requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// Retries a failed reconcile after this long (the default error policy).
    #[must_use]
    pub fn with_error_requeue(mut self, delay: Duration) -> Self {
        self.error_requeue = Some(delay);
        self
    }

    /// Keeps this finalizer on every primary object until its children in every cluster are gone.
    #[must_use]
    pub fn with_finalizer(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// When a parent is deleted while a child cluster stays unreachable for `timeout` (counted from the
    /// deletion), gives up on that cluster's children: they are left behind, and the parent's status and an
    /// event say so. Without this, deletion waits for the cluster to return (nothing is ever orphaned).
    #[must_use]
    pub fn with_abandon_unreachable_after(mut self, timeout: Duration) -> Self {
        self.abandon_unreachable_after = Some(timeout);
        self
    }

    /// When a parent is deleted and some of its children are still there `timeout` after the deletion
    /// (deleted, but kept by finalizers of their own: a Namespace whose content is still being deleted, an
    /// object another controller guards), stops waiting for them: the parent's finalizer is removed, a
    /// `Warning` event `ChildrenAbandoned` names the children that stay, and they are left to finish on
    /// their own. Without this, the parent stays until they are gone (nothing is left behind unseen).
    #[must_use]
    pub fn with_abandon_terminating_after(mut self, timeout: Duration) -> Self {
        self.abandon_terminating_after = Some(timeout);
        self
    }

    /// Adds a kind of child object the controller creates, possibly in other clusters than the primary's.
    #[must_use]
    pub fn owns(mut self, child: Child<C>) -> Self {
        self.children.push(child);
        self
    }

    /// Adds a kind the controller watches without reconciling or owning it (see [`Watch`]): its changes
    /// reconcile the parents its map function returns, or every parent.
    #[must_use]
    pub fn watches(mut self, watch: Watch<C>) -> Self {
        self.watches.push(watch);
        self
    }

    /// Children of kind `K` live in these namespaces, replacing those their `owns` named, in every cluster
    /// `K` is owned in: for namespaces known only at run time. Applies to the `owns` added before it; a
    /// kind the plan does not own is a [`problem`](Self::problem). The rules are those of
    /// [`namespaces`](Self::namespaces).
    #[must_use]
    pub fn child_namespaces<K: PrimaryResource>(
        self,
        namespaces: impl IntoIterator<Item = impl Into<Cow<'static, str>>>,
    ) -> Self {
        let namespaces: Vec<Cow<'static, str>> = namespaces.into_iter().map(Into::into).collect();
        self.edit_children::<K>(|child| child.namespaces = Some(namespaces.clone()))
    }

    /// Children of kind `K` may live in every namespace, in every cluster `K` is owned in (see
    /// [`child_namespaces`](Self::child_namespaces)).
    #[must_use]
    pub fn child_all_namespaces<K: PrimaryResource>(self) -> Self {
        self.edit_children::<K>(|child| child.namespaces = None)
    }

    /// Applies `edit` to every `owns` of kind `K`; remembers `K` as a problem when there is none.
    fn edit_children<K: PrimaryResource>(mut self, edit: impl Fn(&mut Child<C>)) -> Self {
        let resource = ApiResource::erase::<K>(&());
        let mut found = false;
        for child in self.children.iter_mut().filter(|c| c.resource == resource) {
            edit(child);
            found = true;
        }
        if !found {
            self.unowned.push(child_kind(&resource));
        }
        self
    }

    /// The retry delay after a failed reconcile: the plan's, else [`DEFAULT_ERROR_REQUEUE`].
    pub(crate) fn error_requeue_or_default(&self) -> Duration {
        self.error_requeue.unwrap_or(DEFAULT_ERROR_REQUEUE)
    }

    /// The controller's name: used in logs, metrics, probe reports and as the field manager.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The contexts the primary resource is watched in (set by [`with_contexts`](Self::with_contexts)).
    pub fn contexts(&self) -> &[C] {
        &self.contexts
    }

    /// The namespaces the primary resource is watched in (set by [`with_namespaces`](Self::with_namespaces)); empty
    /// means all namespaces.
    pub fn namespaces(&self) -> &[Cow<'static, str>] {
        self.namespaces.as_deref().unwrap_or_default()
    }

    /// The label selector set by [`with_label_selector`](Self::with_label_selector), if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector set by [`with_field_selector`](Self::with_field_selector), if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// The most reconciles run at once, set by [`with_concurrency`](Self::with_concurrency); `None` is unbounded.
    pub fn concurrency(&self) -> Option<u16> {
        self.concurrency
    }

    /// The per-cluster limit set by [`with_concurrency_per_cluster`](Self::with_concurrency_per_cluster), if
    /// any.
    pub fn concurrency_per_cluster(&self) -> Option<u16> {
        self.concurrency_per_cluster
    }

    /// The dispatch order set by [`with_dispatch`](Self::with_dispatch).
    pub fn dispatch(&self) -> Dispatch {
        self.dispatch
    }

    /// The delay set by [`with_debounce`](Self::with_debounce), if any.
    pub fn debounce(&self) -> Option<Duration> {
        self.debounce
    }

    /// The periodic requeue delay set by [`with_requeue_after`](Self::with_requeue_after), if any.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The retry delay after a failed reconcile set by [`with_error_requeue`](Self::with_error_requeue), if any (the
    /// runtime uses [`DEFAULT_ERROR_REQUEUE`] without one).
    pub fn error_requeue(&self) -> Option<Duration> {
        self.error_requeue
    }

    /// The finalizer set by [`with_finalizer`](Self::with_finalizer), if any; the one the runtime keeps is
    /// [`managed_finalizer`](Self::managed_finalizer).
    pub fn finalizer(&self) -> Option<&str> {
        self.finalizer.as_deref()
    }

    /// The finalizer the runtime keeps on primary objects: the declared one, else `kubeplex.dev/<name>` when
    /// the controller owns children (they must be removed before their parent goes); `None` otherwise.
    pub fn managed_finalizer(&self) -> Option<Cow<'_, str>> {
        match (&self.finalizer, self.children.is_empty()) {
            (Some(name), _) => Some(Cow::Borrowed(name.as_ref())),
            (None, false) => Some(Cow::Owned(format!("kubeplex.dev/{}", self.name))),
            (None, true) => None,
        }
    }

    /// The timeout set by [`with_abandon_unreachable_after`](Self::with_abandon_unreachable_after), if any.
    pub fn abandon_unreachable_after(&self) -> Option<Duration> {
        self.abandon_unreachable_after
    }

    /// The timeout set by [`with_abandon_terminating_after`](Self::with_abandon_terminating_after), if any.
    pub fn abandon_terminating_after(&self) -> Option<Duration> {
        self.abandon_terminating_after
    }
}

/// `Kind.group/version` of a child kind, as problems name it.
pub(super) fn child_kind(resource: &ApiResource) -> String {
    format_kind(&resource.kind, &resource.group, &resource.version)
}

#[cfg(test)]
mod tests;
