//! The manager's fleet options: where members come from, what a leave does with their children, how many
//! member changes run at once, and when a leave gives up on a member that does not answer.

use std::time::Duration;

use super::Manager;
use crate::members::{DEFAULT_MEMBER_CHANGES_AT_ONCE, LeavePolicy, MemberProvider};

/// The member provider and how its changes are carried out.
pub(super) struct FleetOptions {
    pub(super) provider: Option<(Box<dyn MemberProvider>, LeavePolicy)>,
    pub(super) at_once: usize,
    pub(super) give_up_after: Option<Duration>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            provider: None,
            at_once: DEFAULT_MEMBER_CHANGES_AT_ONCE,
            give_up_after: None,
        }
    }
}

impl Manager {
    /// Takes the fleet's members from `provider` (clusters that join and leave at run time: kubeconfig
    /// Secrets, a kubeconfig file, your own inventory); `policy` says what happens to a leaving member's
    /// children. Children declared with `owns(.., members)` live in every member ([docs/fleets.md]).
    ///
    /// [docs/fleets.md]: https://github.com/kubeplex/kubeplex/blob/main/docs/fleets.md
    pub fn members(mut self, provider: impl MemberProvider, policy: LeavePolicy) -> Self {
        self.fleet.provider = Some((Box::new(provider), policy));
        self
    }

    /// How many member joins and leaves may be at work at once (default 16; at least 1). Each member's
    /// changes are carried out in the order reported; different members' side by side, up to this many, so
    /// that a burst of a thousand new members neither waits one by one nor floods the API servers. A leave
    /// that only waits for its member to answer does not count.
    pub fn member_changes_at_once(mut self, limit: usize) -> Self {
        self.fleet.at_once = limit.max(1);
        self
    }

    /// Under [`LeavePolicy::Delete`], how long a leaving member that does not answer is waited for before
    /// its children there are abandoned (default: for as long as it takes). Meanwhile `/readyz` shows the
    /// member `leaving` with the reason, the parents' status lists it as `Leaving`, and a kubeconfig
    /// Secret keeps its finalizer; on giving up the leave ends, the Secret provider records a
    /// `MemberChildrenAbandoned` Event on the Secret and lets it go. No other member waits for it.
    pub fn abandon_unreachable_members_after(mut self, after: Duration) -> Self {
        self.fleet.give_up_after = Some(after);
        self
    }
}
