//! What becomes of a child the runtime would otherwise delete: when its parent no longer declares it
//! (pruning), and when its parent is deleted. Each policy that is not the default is recorded on the child
//! as an annotation, so that whoever handles the child next — this replica, a successor, the orphan sweep
//! at start — honours it without knowing the reconcile that declared it.
//!
//! A child the policy spares is **unlinked** (see [`unlink_patch`](super::ownership::unlink_patch)): no
//! longer watched, listed or owned by its parent, and left in place.

use kube::api::ObjectMeta;

/// Annotation on a child: what becomes of it once its parent no longer declares it, `keep` or `delete`.
/// Absent, it is deleted. The runtime sets it from [`Child::keep_on_prune`](crate::Child::keep_on_prune)
/// or [`ChildOptions`](crate::ChildOptions); set it on the object given to
/// [`Cx::child`](crate::Cx::child) to choose per object.
pub const ON_PRUNE_ANNOTATION: &str = "kubeplex.dev/on-prune";

/// Annotation on a child: what becomes of it when its parent is deleted, `orphan` or `delete`. Absent, it
/// is deleted. The runtime sets it from [`Child::orphan_on_delete`](crate::Child::orphan_on_delete) or
/// [`ChildOptions`](crate::ChildOptions); set it on the object given to [`Cx::child`](crate::Cx::child) to
/// choose per object.
pub const ON_DELETE_ANNOTATION: &str = "kubeplex.dev/on-delete";

/// What becomes of a child its parent no longer declares (`owns(Kind, prune = ..)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PrunePolicy {
    /// It is deleted (the default).
    #[default]
    Delete,
    /// It is unlinked and left in place: no longer watched or owned by its parent, never deleted by the
    /// runtime. Helm's `helm.sh/resource-policy: keep`, Argo CD's `Prune=false`.
    Keep,
}

/// What becomes of a child when its parent is deleted (`owns(Kind, on_delete = ..)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DeletePolicy {
    /// It is deleted, and the parent waits until it is gone (the default).
    #[default]
    Delete,
    /// It is unlinked and left in place; the parent goes once its other children are gone.
    Orphan,
}

impl PrunePolicy {
    /// The annotation's value: `delete` or `keep`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Keep => "keep",
        }
    }

    /// The policy an annotation value names, if it names one.
    pub(crate) fn parse(value: &str) -> Option<Self> {
        [Self::Delete, Self::Keep]
            .into_iter()
            .find(|p| p.as_str() == value)
    }

    /// The policy recorded on a child. Only an absent annotation or `delete` lets the runtime delete it:
    /// a value it does not know (a hand edit) errs on the side of keeping.
    pub(crate) fn of(child: &ObjectMeta) -> Self {
        match annotation(child, ON_PRUNE_ANNOTATION) {
            None | Some("delete") => Self::Delete,
            Some(_) => Self::Keep,
        }
    }
}

impl DeletePolicy {
    /// The annotation's value: `delete` or `orphan`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Orphan => "orphan",
        }
    }

    /// The policy an annotation value names, if it names one.
    pub(crate) fn parse(value: &str) -> Option<Self> {
        [Self::Delete, Self::Orphan]
            .into_iter()
            .find(|p| p.as_str() == value)
    }

    /// The policy recorded on a child. Only an absent annotation or `delete` lets the runtime delete it:
    /// a value it does not know (a hand edit) errs on the side of orphaning.
    pub(crate) fn of(child: &ObjectMeta) -> Self {
        match annotation(child, ON_DELETE_ANNOTATION) {
            None | Some("delete") => Self::Delete,
            Some(_) => Self::Orphan,
        }
    }
}

fn annotation<'a>(child: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    child.annotations.as_ref()?.get(key).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotated(key: &str, value: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some([(key.to_owned(), value.to_owned())].into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_an_absent_annotation_or_delete_lets_a_child_be_deleted() {
        assert_eq!(PrunePolicy::of(&ObjectMeta::default()), PrunePolicy::Delete);
        assert_eq!(
            DeletePolicy::of(&ObjectMeta::default()),
            DeletePolicy::Delete
        );
        for (value, prune, delete) in [
            ("delete", PrunePolicy::Delete, DeletePolicy::Delete),
            ("keep", PrunePolicy::Keep, DeletePolicy::Orphan),
            ("orphan", PrunePolicy::Keep, DeletePolicy::Orphan),
            ("Keep", PrunePolicy::Keep, DeletePolicy::Orphan),
        ] {
            assert_eq!(
                PrunePolicy::of(&annotated(ON_PRUNE_ANNOTATION, value)),
                prune
            );
            assert_eq!(
                DeletePolicy::of(&annotated(ON_DELETE_ANNOTATION, value)),
                delete
            );
        }
        // Each policy reads its own annotation only.
        let kept = annotated(ON_PRUNE_ANNOTATION, "keep");
        assert_eq!(DeletePolicy::of(&kept), DeletePolicy::Delete);
    }

    #[test]
    fn the_values_round_trip_and_others_are_none() {
        for policy in [PrunePolicy::Delete, PrunePolicy::Keep] {
            assert_eq!(PrunePolicy::parse(policy.as_str()), Some(policy));
        }
        for policy in [DeletePolicy::Delete, DeletePolicy::Orphan] {
            assert_eq!(DeletePolicy::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(PrunePolicy::parse("orphan"), None);
        assert_eq!(DeletePolicy::parse("keep"), None);
    }
}
