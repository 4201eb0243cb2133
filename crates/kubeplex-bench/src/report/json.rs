//! The report of a run: what it holds, and its JSON file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::machine::Machine;
use crate::config::Options;
use crate::figures::{Goal, Section};

#[derive(Serialize)]
pub(crate) struct Report {
    pub(crate) date: String,
    pub(crate) machine: Machine,
    pub(crate) options: Options,
    pub(crate) setup: BTreeMap<&'static str, f64>,
    pub(crate) sections: BTreeMap<&'static str, Section>,
    pub(crate) goals: Vec<Goal>,
    pub(crate) total_seconds: f64,
}

pub(crate) fn write_json(path: &Path, report: &Report) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}
