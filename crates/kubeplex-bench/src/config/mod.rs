//! What to measure and how much: the presets and the command line that changes them.

mod cli;
mod options;

pub(crate) use cli::Cli;
pub(crate) use options::{Options, SECTIONS};
