//! Sections `fleet`, `failover` and `detection`: parents in a control cluster wanting Deployments in child clusters,
//! the kubeplex operator (as `examples/fleet` is written) against the kube-rs one, each operator a
//! `__fleet` process the parent drives. The member sections reuse the operator, its parents and the
//! parent's observer.

mod admission;
mod app;
mod baseline;
mod child;
mod detection;
mod failover;
mod observe;
mod process;
mod report;
mod scenario;
mod setup;

pub(crate) use app::{FleetApp, FleetAppSpec, PARENT_NAMESPACE, deployment_for};
pub(crate) use child::{FleetSpec, MembersSpec, Reading, Synced, main};
pub(crate) use detection::{DetectionOptions, run as detection};
pub(crate) use failover::{FailoverOptions, run as failover};
pub(crate) use observe::Observer;
pub(crate) use process::Operator;
pub(crate) use scenario::run;
pub(crate) use setup::{FleetOptions, Host};
