//! The member providers kubeplex ships: kubeconfig Secrets (with their finalizer; Cluster API's among
//! them), a kubeconfig file or directory, ClusterProfiles of the Cluster Inventory API, and the kubeconfig
//! handling they share.

mod cluster_profiles;
mod file;
mod kubeconfig;
mod secret_finalizer;
mod secrets;

pub use cluster_profiles::{AccessProviders, AccessProvidersError, ClusterProfiles, JoinCondition};
pub use file::KubeconfigFile;
pub use secret_finalizer::MEMBER_FINALIZER;
pub use secrets::{KubeconfigSecrets, MEMBER_NAME_LABEL};
