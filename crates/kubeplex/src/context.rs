//! Context identities: the clusters a controller talks to, named once and checked by the compiler.

use std::fmt::{self, Debug, Display};
use std::hash::Hash;

/// One kubeconfig context a controller talks to.
///
/// Implemented by the enums [`contexts!`](crate::contexts) declares (typed, a typo is a compile error) and
/// by [`ContextName`] (a context named by a string literal in `#[controller(contexts = ["..."])]`).
pub trait Context: Copy + Eq + Ord + Hash + Debug + Display + Send + Sync + 'static {
    /// The kubeconfig context name this identity resolves to unless remapped at run time.
    fn name(&self) -> &'static str;
}

/// A closed set of contexts: the fleet an operator was compiled for, declared with [`contexts!`](crate::contexts).
pub trait ContextSet: Context {
    /// Every context of the fleet, in declaration order.
    const ALL: &'static [Self];

    /// The kubeconfig context name of each of [`ALL`](ContextSet::ALL), in the same order; usable in `const`
    /// code (it is what `#[controller(fleet = .., contexts = ["..."])]` checks string literals against).
    const NAMES: &'static [&'static str];
}

/// A context named by a string literal rather than a [`ContextSet`] variant.
///
/// The `#[controller]` attribute checks the literal's syntax at compile time; whether the kubeconfig has
/// such a context is checked at run time by the startup probe.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContextName(&'static str);

impl ContextName {
    /// Names a context.
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }
}

impl Context for ContextName {
    fn name(&self) -> &'static str {
        self.0
    }
}

impl Debug for ContextName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(self.0, f)
    }
}

impl Display for ContextName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
