//! The example operator as a user runs it, in one test binary: `fleet` on real clusters (in this process and
//! as a process), its command line and output, its Helm charts and rendered manifests, and the monitoring
//! files. A test that runs the operator starts clusters of its own (the operator's namespaces are fixed);
//! the HA tests, replicas as processes on short leases, are a binary of their own (`tests/ha/`).

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
