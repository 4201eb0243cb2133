//! The measurement child (`__child`): one plain kube-runtime `Controller` per (context, namespace) or one
//! kubeplex `Manager` in its own process, told what to do by a [`Spec`] and reporting an [`Outcome`].

mod process;
mod spec;

pub(crate) use process::{client_for, main};
pub(crate) use spec::{LatencySpec, Outcome, Side, Spec};
