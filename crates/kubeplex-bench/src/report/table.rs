//! The table printed at the end of a run.

use super::json::Report;
use crate::config::SECTIONS;
use crate::figures::Spread;

const MB: f64 = 1024.0 * 1024.0;

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
        } else if report.options.smoke {
            ", --smoke sizes (whether the bench runs, not figures to read)"
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
            let spread = |s: &Spread| format!("{}/{}/{}", num(s.min), num(s.median), num(s.max));
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
