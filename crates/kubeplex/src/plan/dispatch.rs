//! How a controller's reconciles take turns between the clusters their objects come from.

/// How a controller's due reconciles take turns between the clusters their objects come from: typed
/// contexts and members ([`Plan::dispatch`](crate::Plan::dispatch)).
///
/// Either way a key waits once however often it changes, never runs twice at once, and runs no earlier
/// than its debounce or requeue time; the concurrency limit holds for the controller as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// The clusters with a reconcile due take turns, one reconcile each, and each one's reconciles run in
    /// the order they became due: a burst of ten thousand changes in one cluster delays a change in another
    /// by at most one reconcile.
    #[default]
    Fair,
    /// Every reconcile in the order it became due, whatever its cluster (kube-runtime's and
    /// controller-runtime's order): a burst in one cluster is served before what came after it elsewhere.
    Fifo,
}
