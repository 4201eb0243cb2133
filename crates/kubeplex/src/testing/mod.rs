//! Stand-in API servers for the unit tests of every layer: `fake_api`, and `fake_leases` for Leases with
//! generated link faults; `real_cluster` where a real server's answers are the point. They import nothing
//! of the crate, so any layer's tests may use them; the test
//! controller and the test engine, which build the runtime's own parts, live in the layers they build
//! (`controller/test_controller.rs`, `engine/test_engine.rs`). Only tests import any of them.

pub(crate) mod fake_api;
pub(crate) mod fake_leases;
pub(crate) mod real_cluster;
