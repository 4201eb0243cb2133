//! Test-only helpers: a stand-in API server and a test engine. Outside the layers.

pub(crate) mod fake_api;
pub(crate) mod test_engine;
