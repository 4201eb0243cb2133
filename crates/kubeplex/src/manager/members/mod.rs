//! The members' lifecycle, the manager's side: the fleet options kept until the start, the runner that
//! carries each provider's changes out (a client, `/readyz`, pings, the controllers' watches, the leave
//! policy), each change on its own task, and the joins it tries again.

pub(super) mod change;
pub(super) mod join_retries;
pub(super) mod options;
pub(super) mod runner;
