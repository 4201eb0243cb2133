//! The member providers kubeplex ships: kubeconfig Secrets (with their finalizer), a kubeconfig file or
//! directory, and the kubeconfig handling they share.

mod file;
mod kubeconfig;
mod secret_finalizer;
mod secrets;

pub use file::KubeconfigFile;
pub use secret_finalizer::MEMBER_FINALIZER;
pub use secrets::{KubeconfigSecrets, MEMBER_NAME_LABEL};
