//! Members: clusters that join and leave at run time. The provider contract, the member set the runtime
//! keeps, the gate a leave closes, and the providers kubeplex ships.

mod changes;
mod gate;
mod kubeconfig_allowlist;
mod leaving;
mod member_set;
mod provider;
mod providers;

pub use changes::LeaveOutcome;
pub(crate) use changes::{Change, DEFAULT_MEMBER_CHANGES_AT_ONCE, MemberChanges, Slot};
pub(crate) use gate::SyncGuard;
pub(crate) use kubeconfig_allowlist::KubeconfigAllowlist;
pub(crate) use leaving::{LeaveProgress, STANDS_BY};
pub(crate) use member_set::{MemberChange, MemberSet};
pub(crate) use provider::{Command, FixedClients};
pub use provider::{LeavePolicy, MemberProvider, MemberSink, Members};
pub use providers::{
    AccessProviders, AccessProvidersError, ClusterProfiles, JoinCondition, KubeconfigFile,
    KubeconfigSecrets, MEMBER_FINALIZER, MEMBER_NAME_LABEL,
};
