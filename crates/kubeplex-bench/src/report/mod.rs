//! The report of a run: the machine, the options, every section's figures and the goals; written as JSON
//! and printed as a table.

mod json;
mod machine;
mod table;

pub(crate) use json::{Report, write_json};
pub(crate) use machine::Machine;
pub(crate) use table::print_table;
