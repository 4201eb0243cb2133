//! What the attribute accepts: each case compiles (the generated checks raise no warnings) and builds the
//! plan it declares.
//!
//! The ui suite (`tests/ui.rs`) pins what it refuses. These cases live in an ordinary test binary, not in
//! trybuild, so that trybuild only type-checks its cases and never builds kube and k8s-openapi a second time.

mod all_options;
mod cluster_scoped;
mod crate_path;
mod fleet_strings;
mod no_warnings;
mod owns_health;
mod owns_members;
mod readme;
mod string_contexts;
mod watches;
