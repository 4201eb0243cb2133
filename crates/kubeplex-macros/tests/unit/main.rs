//! The attribute's unit tests and expansion snapshots, on its modules compiled into this test binary: a
//! proc-macro crate's own unit tests are built for the host, where they would build kubeplex (a
//! dev-dependency, for the ui and pass tests) a second time.
#![allow(dead_code)] // `contexts` and parts of the others are used only by the macros' entry points.

#[path = "../../src/attribute.rs"]
mod attribute;
#[path = "../../src/contexts.rs"]
mod contexts;
#[path = "../../src/expand.rs"]
mod expand;
#[path = "../../src/parse/mod.rs"]
mod parse;
#[path = "../../src/rules/mod.rs"]
mod rules;
mod snapshots;
#[path = "../../src/validate/mod.rs"]
mod validate;
