//! What a plan needs to be allowed: its primaries watched and patched (status, finalizer), its Events, its
//! children watched, applied and deleted, in every context and namespace it names.

use kube::core::ApiResource;

use super::plan::Plan;
use crate::core::Context;
use crate::core::{Grant, events_grant};

/// The verbs a child kind needs: watched, applied (server-side apply creates as well), deleted.
const CHILD_VERBS: [&str; 6] = ["get", "list", "watch", "create", "patch", "delete"];

/// The verbs a watched kind needs: listed and watched.
const WATCHED_VERBS: [&str; 3] = ["get", "list", "watch"];

/// Where Events about a cluster-scoped object go (the API server's choice for objects without one).
const CLUSTER_EVENTS_NAMESPACE: &str = "default";

impl<C: Context> Plan<C> {
    /// Every permission the controller needs, for the primary kind `primary` (`namespaced`: whether it
    /// lives in a namespace): in each of its contexts (`None`: every member of the fleet) and namespaces
    /// (`None`: cluster-wide, when the plan names none or the kind is cluster-scoped).
    pub(crate) fn grants(&self, primary: &ApiResource, namespaced: bool) -> Vec<Grant> {
        let mut grants = Vec::new();
        let named: Vec<Option<String>> = self
            .contexts
            .iter()
            .map(|c| Some(c.name().to_owned()))
            .collect();
        let places = named.iter().cloned().chain(self.members.then_some(None));
        let namespaces = scoped(namespaced, self.namespaces());
        let plural = &primary.plural;
        for context in places {
            for namespace in &namespaces {
                let (c, ns) = (context.as_deref(), namespace.as_deref());
                grants.push(Grant::new(
                    c,
                    ns,
                    &primary.group,
                    plural,
                    &["get", "list", "watch", "patch"],
                ));
                grants.push(Grant::new(
                    c,
                    ns,
                    &primary.group,
                    &format!("{plural}/status"),
                    &["patch"],
                ));
                if self.managed_finalizer().is_some() {
                    let finalizers = format!("{plural}/finalizers");
                    grants.push(Grant::new(
                        c,
                        ns,
                        &primary.group,
                        &finalizers,
                        &["patch", "update"],
                    ));
                }
                let events = if namespaced {
                    ns
                } else {
                    Some(CLUSTER_EVENTS_NAMESPACE)
                };
                grants.push(events_grant(c, events));
            }
        }
        for child in &self.children {
            let contexts = child.contexts().iter().map(|c| Some(c.name().to_owned()));
            let places = contexts.chain(child.in_members().then_some(None));
            let namespaces = scoped(child.is_namespaced(), child.namespaces());
            let resource = child.resource();
            // A member's own namespace is known only once it joins: granted there as anywhere.
            let anywhere = vec![None];
            for context in places {
                let namespaces = if context.is_none() && child.in_member_default_namespace() {
                    &anywhere
                } else {
                    &namespaces
                };
                for namespace in namespaces {
                    let (c, ns) = (context.as_deref(), namespace.as_deref());
                    grants.push(Grant::new(
                        c,
                        ns,
                        &resource.group,
                        &resource.plural,
                        &CHILD_VERBS,
                    ));
                }
            }
        }
        for watch in &self.watches {
            let contexts = watch.contexts().iter().map(|c| Some(c.name().to_owned()));
            let places = contexts.chain(watch.in_members().then_some(None));
            let namespaces = scoped(watch.is_namespaced(), watch.namespaces());
            let resource = watch.resource();
            for context in places {
                for namespace in &namespaces {
                    let (c, ns) = (context.as_deref(), namespace.as_deref());
                    grants.push(Grant::new(
                        c,
                        ns,
                        &resource.group,
                        &resource.plural,
                        &WATCHED_VERBS,
                    ));
                }
            }
        }
        grants
    }
}

/// The namespaces a kind is granted in: each named one, or cluster-wide (`None`) when none is named or the
/// kind is cluster-scoped.
fn scoped(namespaced: bool, named: &[std::borrow::Cow<'static, str>]) -> Vec<Option<String>> {
    if !namespaced || named.is_empty() {
        return vec![None];
    }
    named.iter().map(|ns| Some(ns.to_string())).collect()
}
