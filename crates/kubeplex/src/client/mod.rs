//! Clients: the pool of one `kube::Client` per context, in-cluster configuration, the credentials every
//! client of a cluster shares, and the fence every write goes through, from the request down to the socket.

mod access;
mod authorization;
mod credential_plugin;
mod fence;
mod fenced_io;
mod identity;
mod in_cluster;
mod last_answer;
mod no_access;
mod pool;
mod protocol;
mod reconnects;
mod tls;
mod transport;

pub(crate) use access::Access;
pub use credential_plugin::DEFAULT_PLUGIN_TIMEOUT;
pub(crate) use fence::{AlsoFencedBy, Fence, NOT_THE_SHARD_OWNER, Role};
pub(crate) use identity::{
    CLUSTER_ID_PROPERTY, IDENTITY_NAMESPACE, IdentityGate, IdentitySource, ask as ask_identity,
    cluster_property,
};
pub(crate) use last_answer::LastAnswer;
pub(crate) use no_access::NoAccess;
pub(crate) use transport::own_client;

pub use in_cluster::{IN_CLUSTER, SERVICE_ACCOUNT_DIR, SERVICE_ACCOUNT_DIR_ENV};
pub use pool::CONTEXT_ENV_PREFIX;
pub(crate) use pool::{ClientPool, KubeconfigSource, PoolConfig, only_context};
