//! The example operator as a user runs it, in one test binary: `fleet` on real clusters (in this process and
//! as a process), its command line and output, its Helm charts and rendered manifests, and the monitoring
//! files. The HA tests, replicas as processes on short leases, are a binary of their own (`tests/ha/`).
//!
//! The tests that run the operator (`scenario`, `rollout`, `metrics`, `status_writes`, `events`, `output`)
//! and the schema's refusals in `invalid_spec` share one set of the demo's three clusters, each test in
//! namespaces of its own, which its operator is given (`support::stage`); one that takes cluster-b away
//! does so for its own operator alone, through a relay, the shared server still up. Those that start
//! clusters of their own: `cluster_down` and `frozen_cluster`, which stop and freeze real servers and time
//! what follows; `invalid_spec`'s stored invalid spec (a CRD without its validation rules);
//! `least_privilege` (a shared set of its own, where the operator runs under the charts' grants);
//! `deploy_manifests`, `chart` and `crd` (cluster-wide manifests and the CRD itself, applied to bare
//! clusters); and `demo` (`fleet demo` starts its own).

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
