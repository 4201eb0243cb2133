//! The runtime's members on real API servers, in one test binary beside `runtime` (two binaries compile
//! side by side): members and their providers, cluster identity, children spread over members and shared
//! between parents, a parent's status among other writers, HTTP/1.1 forced per cluster, and webhooks. Every
//! module's tests share one set of clusters (`support::clusters`, the runtime suite's helpers), each in
//! namespaces and names of its own; a test that stops, freezes or reconfigures a cluster starts an
//! environment of its own.

mod children;
mod http1;
mod identity;
mod member_providers;
mod members;
mod own_status;
mod shared_children;
mod spread;
#[path = "../runtime/support/mod.rs"]
mod support;
mod watched_kinds;
mod webhooks;
