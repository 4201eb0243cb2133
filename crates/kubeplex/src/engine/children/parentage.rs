//! What linking a child needs to know of its parent and the parent's controller.

use crate::core::ParentRef;
use crate::metrics::Metrics;

use super::conflicts::Conflicts;

/// What linking needs to know of the parent and its controller.
pub(crate) struct Parentage<'a> {
    pub(crate) parent: &'a ParentRef,
    pub(crate) controller: &'a str,
    pub(crate) parent_kind: &'a str,
    /// Where applies and prunes are counted.
    pub(crate) metrics: &'a Metrics,
    /// Where children whose parent reference conflicts are reported.
    pub(crate) conflicts: &'a Conflicts,
}
