//! The rules behind the attribute's values, as plain functions on strings: each returns why a value is
//! wrong, and `validate/` turns that into a spanned error. The name rules the runtime checks as well
//! (DNS-1123 labels and subdomains, label keys and values, controller, context and finalizer names) are
//! `kubeplex-names`', shared with it.

pub mod duration;
pub mod names;
pub mod selector;
