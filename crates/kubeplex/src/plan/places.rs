//! Where a plan's controller works: its contexts, namespaces and members, and its children's and watched
//! kinds'.

use indexmap::IndexSet;

use super::child::{Child, expand_namespaces};
use super::plan::Plan;
use super::watch::Watch;
use crate::core::Context;

impl<C: Context> Plan<C> {
    /// The namespaces the primary resource is watched in within each member; `None` is all namespaces.
    pub(crate) fn member_namespaces(&self) -> impl Iterator<Item = Option<&str>> + '_ {
        expand_namespaces(self.namespaces())
    }

    /// Every (context, namespace) pair the primary resource is watched in; `None` is all namespaces.
    pub fn primary_watches(&self) -> impl Iterator<Item = (C, Option<&str>)> + '_ {
        self.contexts.iter().flat_map(move |&context| {
            expand_namespaces(self.namespaces()).map(move |ns| (context, ns))
        })
    }

    /// Every context children live in, each once.
    pub fn child_contexts(&self) -> Vec<C> {
        let all: IndexSet<C> = (self.children.iter())
            .flat_map(|c| c.contexts.iter().copied())
            .collect();
        all.into_iter().collect()
    }

    /// Whether some child kind also lives in every member of the fleet.
    pub fn has_member_children(&self) -> bool {
        self.children.iter().any(|c| c.members)
    }

    /// The child kinds this controller owns.
    pub fn children(&self) -> &[Child<C>] {
        &self.children
    }

    /// The kinds this controller watches without reconciling or owning them (added by
    /// [`watches`](Self::watches)).
    pub fn watched(&self) -> &[Watch<C>] {
        &self.watches
    }

    /// Whether the controller works in the members of the fleet: its primaries, a child kind or a watched
    /// kind live there.
    pub fn works_in_members(&self) -> bool {
        self.members || self.has_member_children() || self.watches.iter().any(|w| w.in_members())
    }

    /// Every context this controller needs: the primary's, every child's and every watched kind's, each
    /// once, in first-seen order. These are the contexts it registers with the startup probe.
    pub fn all_contexts(&self) -> Vec<C> {
        let all: IndexSet<C> = (self.contexts.iter())
            .chain(self.children.iter().flat_map(|c| c.contexts.iter()))
            .chain(self.watches.iter().flat_map(|w| w.contexts().iter()))
            .copied()
            .collect();
        all.into_iter().collect()
    }
}
