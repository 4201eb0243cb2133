//! The runtime on real API servers, in one test binary: every module's tests share one set of clusters
//! (`support::clusters`), each in namespaces and names of its own; a test that stops, freezes or
//! reconfigures a cluster starts an environment of its own.

mod apply_order;
mod child_policies;
mod children;
mod cleanup;
mod configured;
mod deletion_waits;
mod dispatch;
mod faults;
mod forged_children;
mod health;
mod http1;
mod identity;
mod leader_election;
mod member_providers;
mod members;
mod options;
mod own_status;
mod secure_metrics;
mod sharding;
mod shared_children;
mod shutdown;
mod spread;
mod startup;
mod support;
mod user_metrics;
mod watched_kinds;
mod webhooks;
