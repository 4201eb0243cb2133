//! How one declared child is treated, where it differs from its kind's declaration.

use crate::core::{DeletePolicy, PrunePolicy};

/// How one child is treated when its parent no longer declares it, or is deleted, for
/// [`Cx::child_with`](crate::Cx::child_with). What is not set here comes from an annotation the object
/// carries ([`ON_PRUNE_ANNOTATION`](crate::ownership::ON_PRUNE_ANNOTATION),
/// [`ON_DELETE_ANNOTATION`](crate::ownership::ON_DELETE_ANNOTATION)), else from the kind's `owns(..)`.
///
/// ```
/// # use kubeplex::{ChildOptions, ownership::DeletePolicy, ownership::PrunePolicy};
/// let options = ChildOptions::new().keep_on_prune().orphan_on_delete();
/// assert_eq!(options.prune(), Some(PrunePolicy::Keep));
/// assert_eq!(options.on_delete(), Some(DeletePolicy::Orphan));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildOptions {
    prune: Option<PrunePolicy>,
    on_delete: Option<DeletePolicy>,
}

impl ChildOptions {
    /// Nothing chosen: the child is treated as its kind is declared.
    pub fn new() -> Self {
        Self::default()
    }

    /// What becomes of the child once its parent no longer declares it.
    #[must_use]
    pub fn with_prune(mut self, policy: PrunePolicy) -> Self {
        self.prune = Some(policy);
        self
    }

    /// Once its parent no longer declares it, the child is unlinked and left in place, not deleted.
    #[must_use]
    pub fn keep_on_prune(self) -> Self {
        self.with_prune(PrunePolicy::Keep)
    }

    /// What becomes of the child when its parent is deleted.
    #[must_use]
    pub fn with_on_delete(mut self, policy: DeletePolicy) -> Self {
        self.on_delete = Some(policy);
        self
    }

    /// When its parent is deleted, the child is unlinked and left in place, not deleted.
    #[must_use]
    pub fn orphan_on_delete(self) -> Self {
        self.with_on_delete(DeletePolicy::Orphan)
    }

    /// The prune policy chosen (set by [`with_prune`](Self::with_prune)), if any.
    pub fn prune(&self) -> Option<PrunePolicy> {
        self.prune
    }

    /// The delete policy chosen (set by [`with_on_delete`](Self::with_on_delete)), if any.
    pub fn on_delete(&self) -> Option<DeletePolicy> {
        self.on_delete
    }
}
