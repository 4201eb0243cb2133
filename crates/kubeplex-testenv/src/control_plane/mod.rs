//! The machinery under an environment: the upstream programs (found or built), and per cluster the
//! processes, ports, certificates and files they run with. Nothing here is public API except what the
//! crate re-exports (the programs' location); the rest of the crate sees only what this face names.

mod audit_policy;
mod binaries;
mod cluster;
mod controller_manager;
mod exit_registry;
mod go_build;
mod helm;
mod inventory;
mod ledger;
mod pki;
mod process;
mod progress;
mod reserved_port;
mod work_dir;

pub use binaries::{Binaries, CACHE_DIR_VAR, KUBEBUILDER_ASSETS};
pub(crate) use cluster::Cluster;
pub use controller_manager::CONTROLLER_MANAGER_CONTROLLERS;
pub(crate) use controller_manager::controllers_not_healthy;
pub use helm::{HELM_VAR, Helm};
pub use inventory::ClusterInventory;
pub use ledger::LEDGER_VAR;
pub(crate) use ledger::record_start;
pub(crate) use pki::ClusterPki;
pub use pki::NO_PERMISSIONS_USER;
pub(crate) use reserved_port::ReservedPort;
pub(crate) use work_dir::WorkDir;
