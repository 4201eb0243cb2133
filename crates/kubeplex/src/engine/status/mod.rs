//! What a parent is told: kubeplex's part of its status (drafted once per reconcile, written by server-side
//! apply, with the memory of own writes the caches do not show yet) and the Events of its changes; and the
//! parents finalized lately.

pub(super) mod draft;
pub(super) mod events;
pub(super) mod finalized;
pub(super) mod told_leaves;
pub(super) mod write;
