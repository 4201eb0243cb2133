//! The example operator as a user runs it, in one test binary: `fleet` on real clusters (in this process and
//! as a process), its command line and output, its Helm charts and rendered manifests, and the monitoring
//! files. The HA tests, replicas as processes on short leases, are a binary of their own (`tests/ha/`).
//!
//! The tests that run the operator share one set of the demo's three clusters, each test in namespaces of
//! its own, which its operator is given (`support::stage`); one that takes a cluster away does so for its
//! own operator alone, through a relay, the shared server still up. The charts', manifests' and CRD's dry
//! runs and the webhooks use the shared set too, one at a time where they write the same cluster-wide
//! objects (`support::CLUSTER_WIDE`); `frozen_cluster` freezes a cluster for its own operator alone, through
//! a relay that holds every byte. Those that start clusters of their own: `least_privilege` (a set of its
//! own, where the operator runs under the charts' grants) and `demo` (`fleet demo` starts its own).

mod chart;
mod cli;
mod cluster_down;
mod crd;
mod dashboard;
mod demo;
mod deploy_manifests;
mod events;
mod frozen_cluster;
mod invalid_spec;
mod least_privilege;
mod metrics;
mod output;
mod rbac_manifests;
mod rollout;
mod run_namespaces;
mod scenario;
mod status_writes;
mod support;
mod webhooks;
