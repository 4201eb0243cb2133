//! Test doubles for the unit tests, outside the layers: stand-in API servers (`fake_api`, and
//! `fake_leases` for Leases with generated link faults), a test controller and its runtime (`controller`),
//! and a test engine of it (`engine`). Only tests import them: the module is `#[cfg(test)]`.

pub(crate) mod controller;
pub(crate) mod engine;
pub(crate) mod fake_api;
pub(crate) mod fake_leases;
