//! `--smoke` runs every section end to end and writes a JSON report with every section, in the shape each
//! section promises; no timing is asserted.

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::output_within;

#[test]
fn smoke_run_writes_a_report_with_every_section() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    // Well above a --smoke run on a slow machine; a hung section fails here instead of holding CI.
    let output = output_within(
        Command::new(env!("CARGO_BIN_EXE_kubeplex-bench"))
            .args(["--smoke", "--json"])
            .arg(&json),
        Duration::from_secs(10 * 60),
    );
    assert!(
        output.status.success(),
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in ["cores", "memory_bytes", "cpu_model", "kernel", "rustc"] {
        assert!(!report["machine"][key].is_null(), "machine.{key} missing");
    }
    for section in [
        "startup",
        "startup_remote",
        "latency",
        "memory",
        "shared_watches",
        "many_contexts",
        "child_cache",
        "throughput",
        "fairness",
        "fleet",
        "failover",
        "detection",
        "member_join",
        "member_churn",
        "many_members",
    ] {
        let figures = report["sections"][section]["figures"]
            .as_array()
            .unwrap_or_else(|| panic!("section {section} missing"));
        assert!(!figures.is_empty(), "section {section} has no figures");
        for figure in figures {
            for side in ["baseline", "kubeplex"] {
                for stat in ["min", "median", "max", "samples"] {
                    assert!(
                        figure[side].get(stat).is_some(),
                        "{section}: {} lacks {side}.{stat}",
                        figure["name"]
                    );
                }
            }
            assert!(figure.get("ratio").is_some());
        }
    }
    assert!(report["goals"].as_array().is_some_and(|g| !g.is_empty()));
    // The CPU behind the times: the operator's, read for startup, and the API servers', read wherever a section
    // reports it. /proc counts CPU in 10 ms ticks, and a small run can use less than one tick (the servers at
    // startup took none on either side at times), so a reading must be above zero for some figure, not each.
    let startup = report["sections"]["startup"]["figures"].as_array().unwrap();
    let everywhere: Vec<&serde_json::Value> = report["sections"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|section| section["figures"].as_array().into_iter().flatten())
        .collect();
    for (prefix, figures) in [
        ("operator CPU to synced", startup.iter().collect::<Vec<_>>()),
        ("API servers + etcds CPU", everywhere),
    ] {
        let figures: Vec<&serde_json::Value> = figures
            .into_iter()
            .filter(|f| f["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .collect();
        assert!(!figures.is_empty(), "no {prefix:?} figure");
        assert!(
            figures
                .iter()
                .any(|f| f["kubeplex"]["max"].as_f64().is_some_and(|cpu| cpu > 0.0)),
            "{prefix}: no CPU time was read for any figure: {figures:?}"
        );
    }
    // The child cache: heap per cached child, whole objects (baseline column) and metadata only, and its goal.
    let cache = report["sections"]["child_cache"]["figures"]
        .as_array()
        .unwrap();
    let heap = cache
        .iter()
        .find(|f| f["name"] == "heap per cached child")
        .unwrap_or_else(|| panic!("child_cache has no heap figure: {cache:?}"));
    for side in ["baseline", "kubeplex"] {
        assert!(
            heap[side]["samples"]
                .as_array()
                .is_some_and(|s| !s.is_empty() && s.iter().all(|v| v.as_f64().is_some())),
            "child_cache: no {side} samples: {heap}"
        );
    }
    assert!(
        report["goals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["section"] == "child_cache"),
        "child_cache records no goal"
    );
    // Fairness: the quiet context's percentiles and their slowdown under the flood, for every dispatch
    // order against the same baseline runs, and its goal.
    let fairness = report["sections"]["fairness"]["figures"]
        .as_array()
        .unwrap();
    for variant in ["fair", "fair+cap", "fifo"] {
        for what in [
            "quiet p50 without flood",
            "quiet p50 during flood",
            "quiet p50 flood / no flood",
            "quiet p99 without flood",
            "quiet p99 during flood",
            "quiet p99 flood / no flood",
            "flood drained",
        ] {
            let name = format!("{what}, {variant}");
            let figure = fairness
                .iter()
                .find(|f| f["name"] == name.as_str())
                .unwrap_or_else(|| panic!("fairness has no figure {name:?}: {fairness:?}"));
            for side in ["baseline", "kubeplex"] {
                assert!(
                    figure[side]["samples"]
                        .as_array()
                        .is_some_and(|s| !s.is_empty() && s.iter().all(|v| v.as_f64().is_some())),
                    "fairness {name}: no {side} samples: {figure}"
                );
            }
        }
    }
    assert!(
        report["goals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["section"] == "fairness"),
        "fairness records no goal"
    );
    // The fleet scenario: every phase, the operator's and the servers' CPU, 409s and /readyz, a scaling row.
    let fleet = report["sections"]["fleet"]["figures"].as_array().unwrap();
    let named = |prefix: &str| {
        fleet
            .iter()
            .filter(|f| f["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .collect::<Vec<_>>()
    };
    for prefix in [
        "every child with the right image",
        "every parent finalizer + Ready",
        "reconverge after deleting",
        "delete all parents",
        "operator CPU, to converged",
        "operator RSS after converging",
        "operator heap after converging",
        "API servers + etcds CPU",
        "API requests by the operator",
        "409 Conflict responses",
        "/readyz failures",
    ] {
        let figure = named(prefix);
        let figure = figure
            .first()
            .unwrap_or_else(|| panic!("fleet has no {prefix:?} figure"));
        assert!(
            figure["kubeplex"]["samples"]
                .as_array()
                .is_some_and(|s| !s.is_empty()),
            "{prefix}: no kubeplex samples: {figure}"
        );
    }
    assert!(
        named("scaling: every parent ready").len() >= 2,
        "the scaling row has fewer than 2 sizes"
    );
    for prefix in ["operator CPU, to converged", "API servers + etcds CPU"] {
        let figure = named(prefix)[0];
        for side in ["baseline", "kubeplex"] {
            assert!(
                figure[side]["max"].as_f64().is_some_and(|cpu| cpu > 0.0),
                "fleet {prefix}: no {side} CPU time was read: {figure}"
            );
        }
    }
    let fleet_goals = report["goals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["section"] == "fleet")
        .count();
    assert!(fleet_goals >= 4, "fleet records {fleet_goals} goals");
    // Failover: a takeover timed for every kill, and its goal.
    let kills = report["options"]["failover"]["kills"].as_u64().unwrap() as usize;
    let failover = report["sections"]["failover"]["figures"]
        .as_array()
        .unwrap();
    for figure in failover {
        let samples = figure["kubeplex"]["samples"].as_array();
        assert!(
            samples.is_some_and(|s| s.len() == kills && s.iter().all(|v| v.as_f64().is_some())),
            "failover: not one time per kill: {figure}"
        );
    }
    assert!(
        report["goals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["section"] == "failover"),
        "failover records no goal"
    );
    // Detection: a time for every freeze, and its goal.
    let freezes = report["options"]["detection"]["freezes"].as_u64().unwrap() as usize;
    let noticed = &report["sections"]["detection"]["figures"][0]["kubeplex"]["samples"];
    assert!(
        noticed
            .as_array()
            .is_some_and(|s| s.len() == freezes && s.iter().all(|v| v.as_f64().is_some())),
        "detection: not one time per freeze: {noticed}"
    );
    assert!(
        (report["goals"].as_array().unwrap().iter()).any(|g| g["section"] == "detection"),
        "detection records no goal"
    );
    // The member sections: each has a figure for every join (and cycle), from the operator's own process.
    // They have no baseline column: kube-runtime has no members.
    let figure = |section: &str, name: &str| -> Vec<f64> {
        let figures = report["sections"][section]["figures"].as_array().unwrap();
        let figure = figures
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{section} has no figure {name:?}: {figures:?}"));
        figure["kubeplex"]["samples"]
            .as_array()
            .unwrap_or_else(|| panic!("{section} {name}: no samples: {figure}"))
            .iter()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .collect()
    };
    let joins = report["options"]["members"]["joins"].as_u64().unwrap() as usize;
    for name in [
        "Secret created -> every child in member",
        "Secret deleted -> no child in member",
        "Secret deleted -> Secret gone",
    ] {
        let samples = figure("member_join", name);
        assert_eq!(samples.len(), joins, "member_join {name}: {samples:?}");
        // A leave that left children behind has no time (null): a measurement, not a failure here.
        assert!(
            samples.iter().any(|s| *s > 0.0) && samples.iter().all(|s| s.is_nan() || *s > 0.0),
            "member_join {name}: {samples:?}"
        );
    }
    let cycles = report["options"]["members"]["churn_cycles"]
        .as_u64()
        .unwrap() as usize;
    for name in [
        "RSS after the warm-up cycle",
        "RSS after the last cycle",
        "heap after the warm-up cycle",
        "heap after the last cycle",
        "RSS after the last / after warm-up",
    ] {
        let samples = figure("member_churn", name);
        assert!(
            samples.len() == 1 && samples[0] > 0.0,
            "member_churn {name}: {samples:?}"
        );
    }
    let joined = figure("member_churn", "heap while joined");
    assert_eq!(joined.len(), cycles, "member_churn: {joined:?}");
    for section in ["member_join", "member_churn"] {
        let stray = figure(section, "children left behind per leave");
        // A leave under the Delete policy takes every child with it: one left behind is a defect, and
        // the report's notes name it.
        assert!(
            !stray.is_empty() && stray.iter().all(|n| *n == 0.0),
            "{section}: children left behind per leave {stray:?}; notes: {:#}",
            report["sections"][section]["notes"]
        );
    }
    for section in ["member_join", "member_churn"] {
        assert!(
            report["goals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["section"] == section),
            "{section} records no goal"
        );
    }
    // Many members: for each M, the join, memory per member, steady-state requests and the leave; the fit
    // over the M values; the start with every Secret present. Their values are the bench's to judge.
    let sizes: Vec<u64> = report["options"]["members"]["many"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_u64().unwrap())
        .collect();
    let largest = *sizes.iter().max().unwrap();
    let mut names: Vec<String> = sizes
        .iter()
        .flat_map(|m| {
            [
                "Secrets created -> every child in every member",
                "operator RSS per member",
                "operator heap per member",
                "requests per member per 10 s in steady state",
                "heap after all left / before the joins",
                "children left behind after all left",
            ]
            .map(|name| format!("{name}, M={m}"))
        })
        .collect();
    names.extend([
        "RSS per additional member (least squares)".to_owned(),
        "heap per additional member (least squares)".to_owned(),
        format!("start with {largest} member Secrets: ready (typed contexts)"),
        format!("start with {largest} member Secrets: every child in every member"),
    ]);
    for name in &names {
        let samples = figure("many_members", name);
        assert!(
            samples.len() == 1 && samples[0].is_finite(),
            "many_members {name}: {samples:?}"
        );
    }
    let many_goals = report["goals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["section"] == "many_members")
        .count();
    assert_eq!(many_goals, 5, "many_members records {many_goals} goals");
}
