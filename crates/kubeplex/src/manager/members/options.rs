//! What the manager keeps of its fleet's options until it starts.

use std::time::Duration;

use crate::client::IdentitySource;

use crate::members::{
    DEFAULT_MEMBER_CHANGES_AT_ONCE, KubeconfigAllowlist, LeavePolicy, MemberProvider,
};

/// The member provider and how its changes are carried out.
pub(in crate::manager) struct FleetOptions {
    pub(in crate::manager) provider: Option<(Box<dyn MemberProvider>, LeavePolicy)>,
    pub(in crate::manager) at_once: usize,
    pub(in crate::manager) give_up_after: Option<Duration>,
    /// What member kubeconfigs may contain beyond inline credentials.
    pub(in crate::manager) allowlist: KubeconfigAllowlist,
    /// Several names (contexts, members) may reach one cluster.
    pub(in crate::manager) allow_duplicates: bool,
    /// Where every cluster's identity is read.
    pub(in crate::manager) identity_source: IdentitySource,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            provider: None,
            at_once: DEFAULT_MEMBER_CHANGES_AT_ONCE,
            give_up_after: None,
            allowlist: KubeconfigAllowlist::default(),
            allow_duplicates: false,
            identity_source: IdentitySource::KubeSystem,
        }
    }
}
