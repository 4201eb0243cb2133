//! The rules behind the attribute's values, as plain functions on strings: each returns why a value is
//! wrong, and `validate/` turns that into a spanned error.

pub mod dns;
pub mod duration;
pub mod names;
pub mod selector;
