//! What a controller watches and where: the description `#[controller]` generates.

use std::borrow::Cow;
use std::time::Duration;

use kube::core::ApiResource;

use crate::child_watch::{OpenChildWatch, open_child_watch, open_full_child_watch};
use crate::context::Context;
use crate::resource::PrimaryResource;

/// The longest the default error policy waits between retries of an object that keeps failing.
pub const MAX_ERROR_REQUEUE: Duration = Duration::from_secs(300);

/// How long a failed reconcile waits before it is retried when the plan sets no `error_requeue`.
pub const DEFAULT_ERROR_REQUEUE: Duration = Duration::from_secs(5);

/// The longest a controller name may be: it is a label value on every child (63 characters at most).
pub const MAX_CONTROLLER_NAME: usize = 63;

/// Where a controller's primary resource is watched, where its children live, and how it reconciles.
///
/// `#[controller]` builds one from its attribute; it can also be written by hand with the builder methods.
#[derive(Clone, Debug)]
pub struct Plan<C> {
    name: Cow<'static, str>,
    contexts: Vec<C>,
    namespaces: Vec<Cow<'static, str>>,
    label_selector: Option<Cow<'static, str>>,
    field_selector: Option<Cow<'static, str>>,
    concurrency: Option<u16>,
    debounce: Option<Duration>,
    requeue_after: Option<Duration>,
    error_requeue: Option<Duration>,
    finalizer: Option<Cow<'static, str>>,
    abandon_after: Option<Duration>,
    children: Vec<Child<C>>,
}

impl<C: Context> Plan<C> {
    /// A plan for the controller called `name`, watching nothing yet.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self {
            name: name.into(),
            contexts: Vec::new(),
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            concurrency: None,
            debounce: None,
            requeue_after: None,
            error_requeue: None,
            finalizer: None,
            abandon_after: None,
            children: Vec::new(),
        }
    }

    /// Watches the primary resource in these contexts.
    #[must_use]
    pub fn contexts(mut self, contexts: impl IntoIterator<Item = C>) -> Self {
        self.contexts.extend(contexts);
        self
    }

    /// Watches the primary resource in these namespaces only (all namespaces when none are given).
    #[must_use]
    pub fn namespaces<S: Into<Cow<'static, str>>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        self.namespaces
            .extend(namespaces.into_iter().map(Into::into));
        self
    }

    /// Watches only objects matching this label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Watches only objects matching this field selector.
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<Cow<'static, str>>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Runs at most this many reconciles at once (unbounded when not set).
    #[must_use]
    pub fn concurrency(mut self, limit: u16) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// Waits this long after an event for further events on the same object before reconciling.
    #[must_use]
    pub fn debounce(mut self, delay: Duration) -> Self {
        self.debounce = Some(delay);
        self
    }

    /// Reconciles every object again this long after its last successful reconcile.
    #[must_use]
    pub fn requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// Retries a failed reconcile after this long (the default error policy).
    #[must_use]
    pub fn error_requeue(mut self, delay: Duration) -> Self {
        self.error_requeue = Some(delay);
        self
    }

    /// Keeps this finalizer on every primary object until its children in every context are gone.
    #[must_use]
    pub fn finalizer(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// When a parent is deleted while a child context stays unreachable for `timeout` (counted from the
    /// deletion), gives up on that context's children: they are left behind, and the parent's status and an
    /// event say so. Without this, deletion waits for the context to return (nothing is ever orphaned).
    #[must_use]
    pub fn abandon_unreachable_after(mut self, timeout: Duration) -> Self {
        self.abandon_after = Some(timeout);
        self
    }

    /// Adds a kind of child object the controller creates, possibly in other contexts than the primary's.
    #[must_use]
    pub fn owns(mut self, child: Child<C>) -> Self {
        self.children.push(child);
        self
    }

    /// What is wrong with the plan, if anything; `#[controller]` checks the same while compiling, so this
    /// catches plans written by hand.
    pub(crate) fn problem(&self) -> Option<String> {
        let name = self.name.as_ref();
        let label_value = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && name
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        if name.len() > MAX_CONTROLLER_NAME || !label_value {
            return Some(format!(
                "the controller name {name:?} is written into a label value on every child and into the \
                 default finalizer: it must be 1 to {MAX_CONTROLLER_NAME} characters of letters, digits, \
                 '-', '_' or '.', starting and ending with a letter or digit; give a shorter `name`"
            ));
        }
        if self.contexts.is_empty() {
            return Some("the plan watches no context; give it at least one".into());
        }
        None
    }

    /// The retry delay after a failed reconcile: the plan's, else [`DEFAULT_ERROR_REQUEUE`].
    pub(crate) fn error_requeue_or_default(&self) -> Duration {
        self.error_requeue.unwrap_or(DEFAULT_ERROR_REQUEUE)
    }

    /// The controller's name: used in logs, metrics, probe reports and as the field manager.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The contexts the primary resource is watched in.
    pub fn context_list(&self) -> &[C] {
        &self.contexts
    }

    /// The namespaces the primary resource is watched in; empty means all namespaces.
    pub fn namespace_list(&self) -> &[Cow<'static, str>] {
        &self.namespaces
    }

    /// Every (context, namespace) pair the primary resource is watched in; `None` is all namespaces.
    pub fn watches(&self) -> impl Iterator<Item = (C, Option<&str>)> + '_ {
        self.contexts.iter().flat_map(move |&context| {
            expand_namespaces(&self.namespaces).map(move |ns| (context, ns))
        })
    }

    /// The label selector, if any.
    pub fn label_selector_value(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector_value(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// The most reconciles run at once; `None` is unbounded.
    pub fn concurrency_limit(&self) -> Option<u16> {
        self.concurrency
    }

    /// The debounce delay, if any.
    pub fn debounce_delay(&self) -> Option<Duration> {
        self.debounce
    }

    /// The periodic requeue delay, if any.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The retry delay after a failed reconcile, if set.
    pub fn error_requeue_delay(&self) -> Option<Duration> {
        self.error_requeue
    }

    /// The finalizer kept on primary objects, if any.
    pub fn finalizer_name(&self) -> Option<&str> {
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

    /// The abandon policy for unreachable contexts during deletion, if any.
    pub fn abandon_after(&self) -> Option<Duration> {
        self.abandon_after
    }

    /// Every context children live in, each once.
    pub fn child_contexts(&self) -> Vec<C> {
        let mut all = Vec::new();
        for &context in self.children.iter().flat_map(|c| c.contexts.iter()) {
            if !all.contains(&context) {
                all.push(context);
            }
        }
        all
    }

    /// The child kinds this controller owns.
    pub fn children(&self) -> &[Child<C>] {
        &self.children
    }

    /// Every context this controller needs: the primary's and every child's, each once, in first-seen order.
    /// These are the contexts it registers with the startup probe.
    pub fn all_contexts(&self) -> Vec<C> {
        let mut all = Vec::new();
        let declared = self
            .contexts
            .iter()
            .chain(self.children.iter().flat_map(|c| c.contexts.iter()));
        for &context in declared {
            if !all.contains(&context) {
                all.push(context);
            }
        }
        all
    }
}

/// A kind of object a controller creates for its primary objects, in the contexts and namespaces named.
#[derive(Clone, Debug)]
pub struct Child<C> {
    resource: ApiResource,
    contexts: Vec<C>,
    namespaces: Vec<Cow<'static, str>>,
    /// Opens the typed watch of this kind, chosen where the type is known.
    pub(crate) open: OpenChildWatch,
    /// Opens a watch that caches whole objects (see [`Child::cache_objects`]).
    open_full: OpenChildWatch,
}

impl<C: Context> Child<C> {
    /// Children of kind `K`, in no context yet.
    pub fn of<K: PrimaryResource>() -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            contexts: Vec::new(),
            namespaces: Vec::new(),
            open: open_child_watch::<K>,
            open_full: open_full_child_watch::<K>,
        }
    }

    /// Caches these children whole (spec and status), so that the reconcile can read them with
    /// [`Cx::cached`](crate::Cx::cached); by default only their metadata is cached, which is all the
    /// runtime needs and a fraction of the memory.
    #[must_use]
    pub fn cache_objects(mut self) -> Self {
        self.open = self.open_full;
        self
    }

    /// Children live in these contexts.
    #[must_use]
    pub fn contexts(mut self, contexts: impl IntoIterator<Item = C>) -> Self {
        self.contexts.extend(contexts);
        self
    }

    /// Children live in these namespaces (all namespaces when none are given).
    #[must_use]
    pub fn namespaces<S: Into<Cow<'static, str>>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        self.namespaces
            .extend(namespaces.into_iter().map(Into::into));
        self
    }

    /// The child kind's group, version, kind and plural.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// The contexts children live in.
    pub fn context_list(&self) -> &[C] {
        &self.contexts
    }

    /// The namespaces children live in; empty means all namespaces.
    pub fn namespace_list(&self) -> &[Cow<'static, str>] {
        &self.namespaces
    }

    /// Every (context, namespace) pair children are watched in; `None` is all namespaces.
    pub fn watches(&self) -> impl Iterator<Item = (C, Option<&str>)> + '_ {
        self.contexts.iter().flat_map(move |&context| {
            expand_namespaces(&self.namespaces).map(move |ns| (context, ns))
        })
    }
}

/// The namespaces to watch: each named one, or a single "all namespaces" when none is named.
fn expand_namespaces<'a>(
    namespaces: &'a [Cow<'static, str>],
) -> impl Iterator<Item = Option<&'a str>> {
    let all = namespaces.is_empty().then_some(None);
    namespaces.iter().map(|ns| Some(ns.as_ref())).chain(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ContextName;

    fn plan(name: impl Into<Cow<'static, str>>) -> Plan<ContextName> {
        Plan::new(name).contexts([ContextName::new("control")])
    }

    #[test]
    fn names_that_cannot_be_label_values_are_refused() {
        assert_eq!(plan("app-deployer").problem(), None);
        assert_eq!(plan("a".repeat(63)).problem(), None);
        for bad in [
            "a".repeat(64),
            "-leading".into(),
            "has space".into(),
            String::new(),
        ] {
            let problem = plan(bad.clone()).problem().unwrap_or_default();
            assert!(
                problem.contains("give a shorter `name`"),
                "{bad:?}: {problem}"
            );
        }
        assert!(
            Plan::<ContextName>::new("x")
                .problem()
                .unwrap()
                .contains("no context")
        );
    }

    #[test]
    fn the_default_finalizer_is_named_after_the_controller_when_it_has_children() {
        let owning = plan("web").owns(
            Child::of::<k8s_openapi::api::core::v1::ConfigMap>().contexts([ContextName::new("a")]),
        );
        assert_eq!(
            owning.managed_finalizer().as_deref(),
            Some("kubeplex.dev/web")
        );
        assert_eq!(plan("web").managed_finalizer(), None);
        let named = plan("web").finalizer("example.com/cleanup");
        assert_eq!(
            named.managed_finalizer().as_deref(),
            Some("example.com/cleanup")
        );
    }
}
