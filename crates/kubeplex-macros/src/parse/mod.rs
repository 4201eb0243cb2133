//! The grammar of `#[controller(...)]`: one field per key, one doc line per field.
//!
//! Parsing only checks the *shape* of each value (a type, a list, a string…); what the values mean is
//! checked in `validate/`. Unknown keys are darling's own error, with its "did you mean"; each key is
//! parsed on its own first, so that one bad key never hides the others.
//!
//! `args.rs` is the attribute as a whole ([`ControllerArgs`], one field per key) and how it is parsed,
//! `owns.rs` the inside of `owns(..)`, `watches.rs` the inside of `watches(..)`, `values.rs` the keys' value types, `keys.rs` how an item's key is read.

mod args;
mod keys;
mod owns;
mod values;
mod watches;

pub use args::{ControllerArgs, parse_args};
pub use values::{ContextItem, ContextList, Str, StrList, Word};
pub use watches::Watches;

#[cfg(test)]
mod tests;
