//! The runtime on real API servers, in one test binary (its members, identity, children across members and
//! webhooks are `members`', which compiles beside it): every module's tests share one set of clusters
//! (`support::clusters`), each in namespaces and names of its own; a test that stops, freezes or
//! reconfigures a cluster starts an environment of its own.

mod apply_order;
mod child_policies;
mod cleanup;
mod configured;
mod deletion_waits;
mod dispatch;
mod faults;
mod forged_children;
mod health;
mod leader_election;
mod options;
mod secure_metrics;
mod sharding;
mod shutdown;
mod startup;
mod support;
mod user_metrics;
