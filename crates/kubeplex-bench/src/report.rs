//! The report of a run: what it holds, its JSON file and the table printed at the end.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::bench::{Goal, Section};
use crate::machine::Machine;
use crate::options::{Options, SECTIONS};

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

const MB: f64 = 1024.0 * 1024.0;

pub(crate) fn write_json(path: &Path, report: &Report) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(crate) fn print_table(report: &Report) {
    let m = &report.machine;
    println!(
        "kubeplex-bench {}  {} cores, {:.0} GiB, {}, Linux {}, {}",
        report.date,
        m.cores,
        m.memory_bytes as f64 / (1024.0 * MB),
        m.cpu_model,
        m.kernel,
        m.rustc
    );
    println!(
        "repeats {} (min/median/max), ratio = kubeplex median / baseline median{}",
        report.options.repeats,
        if report.options.quick {
            ", --quick sizes"
        } else {
            ""
        }
    );
    // In the order the sections run (the map is sorted by name).
    let order = SECTIONS
        .iter()
        .flat_map(|s| match *s {
            "memory" => vec!["memory", "shared_watches"],
            other => vec![other],
        })
        .filter_map(|key| report.sections.get(key).map(|section| (key, section)));
    for (key, section) in order {
        println!("\n## {} ({key})", section.title);
        println!(
            "{:<42} {:>5}  {:>22}  {:>22}  {:>6}",
            "figure", "unit", "baseline min/med/max", "kubeplex min/med/max", "ratio"
        );
        for f in &section.figures {
            let spread = |s: &crate::stats::Spread| {
                format!("{}/{}/{}", num(s.min), num(s.median), num(s.max))
            };
            println!(
                "{:<42} {:>5}  {:>22}  {:>22}  {:>6}",
                f.name,
                f.unit,
                spread(&f.baseline),
                spread(&f.kubeplex),
                num(f.ratio)
            );
        }
        for note in &section.notes {
            println!("  {note}");
        }
    }
    println!("\n## goals");
    for goal in &report.goals {
        println!(
            "[{}] {}: {} — measured {}",
            if goal.met { "met" } else { "MISSED" },
            goal.section,
            goal.goal,
            goal.measured
        );
    }
    println!("\ntotal {:.0} s", report.total_seconds);
}
