//! Context identities: the clusters a controller talks to, named once and checked by the compiler.

use std::fmt::{self, Debug, Display};
use std::hash::Hash;

/// One kubeconfig context a controller talks to.
///
/// Implemented by the enums [`contexts!`](crate::contexts) declares (typed, a typo is a compile error) and
/// by [`ContextName`] (a context named by a string literal in `#[controller(contexts = ["..."])]`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a context type",
    label = "not declared with `kubeplex::contexts!`",
    note = "declare the fleet's contexts with `kubeplex::contexts! {{ pub enum Fleet {{ Control = \"control\" }} }}`, or use string contexts (`kubeplex::ContextName`)"
)]
pub trait Context: Copy + Eq + Ord + Hash + Debug + Display + Send + Sync + 'static {
    /// The kubeconfig context name this identity resolves to unless remapped at run time.
    fn name(&self) -> &'static str;
}

/// A closed set of contexts: the fleet an operator was compiled for, declared with [`contexts!`](crate::contexts).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a fleet of contexts",
    label = "not declared with `kubeplex::contexts!`",
    note = "declare it with `kubeplex::contexts! {{ pub enum Fleet {{ Control = \"control\" }} }}`"
)]
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

/// A name that is not one of a fleet's contexts: the error of a [`contexts!`](crate::contexts) enum's
/// `FromStr` and `TryFrom<&str>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownContext {
    name: String,
    fleet: &'static str,
    known: &'static [&'static str],
}

impl UnknownContext {
    /// `name` is not a context of the fleet called `fleet`, whose context names are `known`.
    pub fn new(name: &str, fleet: &'static str, known: &'static [&'static str]) -> Self {
        Self {
            name: name.to_owned(),
            fleet,
            known,
        }
    }

    /// The name that was looked up.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fleet's context names.
    pub fn known(&self) -> &'static [&'static str] {
        self.known
    }
}

impl Display for UnknownContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a context of `{}`; its contexts are: {}",
            self.name,
            self.fleet,
            self.known.join(", ")
        )
    }
}

impl std::error::Error for UnknownContext {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_context_names_the_fleet() {
        let e = UnknownContext::new("x", "Fleet", &["a", "b"]);
        assert_eq!(e.name(), "x");
        assert_eq!(e.known(), ["a", "b"]);
        assert_eq!(
            e.to_string(),
            "`x` is not a context of `Fleet`; its contexts are: a, b"
        );
    }
}
