//! Members: clusters that join and leave a fleet at run time, named by strings, beside the typed contexts
//! the operator was compiled for; and [`Cluster`], the one type that says "a fixed context or a member".

use std::fmt::{self, Debug, Display};
use std::sync::Arc;

use super::context::Context;

/// A cluster discovered at run time (from a kubeconfig Secret, a kubeconfig file, or your own inventory).
///
/// Its name is the member's name as its provider reports it; it labels the member's entries in `/readyz`,
/// `/metrics`, the parents' status and the logs, as a context's name does.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Member(Arc<str>);

impl Member {
    /// A member named `name` (not checked here: a provider's names are checked when they join).
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// The member's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(&*self.0, f)
    }
}

impl Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a child goes or a client points: one of the fleet's typed contexts, or a member.
///
/// Every method of [`Cx`](crate::Cx) that takes a place takes `impl Into<Cluster<C>>`, so a typed context
/// (`Fleet::ClusterA`, checked by the compiler) and a [`Member`] (known at run time) are both accepted.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Cluster<C> {
    /// A context declared with [`contexts!`](crate::contexts) (or a string context).
    Context(C),
    /// A member of the fleet, discovered at run time.
    Member(Member),
}

impl<C: Context> Cluster<C> {
    /// The name the runtime knows the place by: the context's kubeconfig name, or the member's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Context(context) => context.name(),
            Self::Member(member) => member.name(),
        }
    }
}

impl<C: Context> Cluster<C> {
    /// The typed context, when it is one.
    pub fn as_context(&self) -> Option<C> {
        match self {
            Self::Context(context) => Some(*context),
            Self::Member(_) => None,
        }
    }

    /// The member, when it is one.
    pub fn as_member(&self) -> Option<&Member> {
        match self {
            Self::Context(_) => None,
            Self::Member(member) => Some(member),
        }
    }
}

/// `cx.cluster() == Fleet::Control` reads as it did when contexts were all typed.
impl<C: Context> PartialEq<C> for Cluster<C> {
    fn eq(&self, other: &C) -> bool {
        self.as_context() == Some(*other)
    }
}

impl<C: Context> Display for Cluster<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl<C: Context> From<C> for Cluster<C> {
    fn from(context: C) -> Self {
        Self::Context(context)
    }
}

impl<C: Context> From<Member> for Cluster<C> {
    fn from(member: Member) -> Self {
        Self::Member(member)
    }
}

impl<C: Context> From<&Member> for Cluster<C> {
    fn from(member: &Member) -> Self {
        Self::Member(member.clone())
    }
}

/// Why `name` cannot be a member's name, if it cannot: the rules of a DNS-1123 label (it labels metrics
/// and names a status entry), and not one of the fixed contexts (a member never shadows a typed context).
pub(crate) fn name_problem(name: &str, fixed: &[String]) -> Option<String> {
    if let Err(why) = kubeplex_names::dns_label(name) {
        return Some(format!(
            "member name {name:?} is not a DNS-1123 label: {why}"
        ));
    }
    fixed.iter().any(|f| f == name).then(|| {
        format!(
            "member name {name} is already a context of the fleet; give the member another name"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ContextName;

    #[test]
    fn a_target_is_a_context_or_a_member_by_name() {
        let fixed: Cluster<ContextName> = ContextName::new("cluster-a").into();
        let member: Cluster<ContextName> = Member::new("cluster-c").into();
        assert_eq!((fixed.name(), member.name()), ("cluster-a", "cluster-c"));
        assert_eq!(member.to_string(), "cluster-c");
        assert_ne!(fixed, member);
    }

    #[test]
    fn member_names_are_labels_and_never_a_fixed_context() {
        let fixed = ["cluster-a".to_owned()];
        assert_eq!(name_problem("cluster-c", &fixed), None);
        assert_eq!(
            name_problem("Cluster_C", &fixed).unwrap(),
            format!(
                "member name \"Cluster_C\" is not a DNS-1123 label: {}",
                kubeplex_names::dns_label("Cluster_C").unwrap_err()
            )
        );
        assert!(name_problem("", &fixed).is_some());
        assert!(name_problem(&"a".repeat(64), &fixed).is_some());
        assert_eq!(
            name_problem("cluster-a", &fixed).unwrap(),
            "member name cluster-a is already a context of the fleet; give the member another name"
        );
    }
}
