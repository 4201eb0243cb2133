//! The parent's command line: clap for the syntax, `--help` and errors; the sizes start from the
//! driver's presets (full, `--quick` or `--smoke`), and every option given replaces one of them.

use std::path::PathBuf;

use clap::Parser;
use clap::builder::RangedU64ValueParser;
use clap::builder::styling::Reset;

use super::options::{self, Options};

/// Benchmarks kubeplex against a plain kube-runtime Controller on three real local API servers, and
/// prints a table (and with --json, a report). Options left out keep the full sizes, or --quick's or
/// --smoke's.
#[derive(Debug, Parser)]
#[command(name = "kubeplex-bench", version, after_help = child_wrapper_note())]
pub(crate) struct Cli {
    /// Small sizes and 2 repeats (a few minutes in release: the run to compare before and after a change);
    /// the options below still apply on top.
    #[arg(long)]
    quick: bool,
    /// Every section once at the smallest sizes that run all of it, 1 repeat (the tests' end-to-end run;
    /// its figures are not for reading); the options below still apply on top.
    #[arg(long, conflicts_with = "quick")]
    smoke: bool,
    /// Also write the report, with every sample, as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Runs of every measurement on each side.
    #[arg(long, value_name = "R", value_parser = positive())]
    repeats: Option<usize>,
    /// Objects per context listed at startup (startup, startup_remote).
    #[arg(long, value_name = "N", value_parser = positive())]
    startup_objects: Option<usize>,
    /// Objects in the cache (memory, shared watches).
    #[arg(long, value_name = "N", value_parser = positive())]
    memory_objects: Option<usize>,
    /// Objects to reconcile (throughput).
    #[arg(long, value_name = "N", value_parser = positive())]
    throughput_objects: Option<usize>,
    /// Numbers of idle contexts to fit the cost per context over (many_contexts).
    #[arg(long, value_name = "C[,C..]", value_delimiter = ',', value_parser = positive())]
    idle_contexts: Option<Vec<usize>>,
    /// Seconds of changes at a steady rate (latency).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u32).range(1..))]
    latency_seconds: Option<u32>,
    /// Round trip of the delayed link in front of every API server (startup_remote).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(1..))]
    link_rtt_ms: Option<u32>,
    /// Parents in the fleet section's main row (fleet).
    #[arg(long, value_name = "P", value_parser = positive())]
    fleet_parents: Option<usize>,
    /// Further numbers of parents for the fleet section's scaling row (fleet).
    #[arg(long, value_name = "P[,P..]", value_delimiter = ',', value_parser = positive())]
    fleet_scale: Option<Vec<usize>>,
    /// Child contexts, one per test API server (fleet).
    #[arg(long, value_name = "C", value_parser = RangedU64ValueParser::<usize>::new().range(1..=3))]
    fleet_clusters: Option<usize>,
    /// Namespaces per child context (fleet).
    #[arg(long, value_name = "N", value_parser = positive())]
    fleet_namespaces: Option<usize>,
    /// Parents whose children live in every member (member_join).
    #[arg(long, value_name = "P", value_parser = positive())]
    member_parents: Option<usize>,
    /// Timed joins of the member, each followed by a timed leave (member_join).
    #[arg(long, value_name = "J", value_parser = positive())]
    member_joins: Option<usize>,
    /// Children the operator caches while the member is joined (member_churn).
    #[arg(long, value_name = "N", value_parser = positive())]
    churn_objects: Option<usize>,
    /// Join/leave cycles after the warm-up one (member_churn).
    #[arg(long, value_name = "C", value_parser = positive())]
    churn_cycles: Option<usize>,
    /// Changes the noisy context floods the controller with (fairness).
    #[arg(long, value_name = "N", value_parser = positive())]
    fairness_flood: Option<usize>,
    /// Numbers of members joined at once, the memory per member fitted over them (many_members).
    #[arg(long, value_name = "M[,M..]", value_delimiter = ',', value_parser = positive())]
    members: Option<Vec<usize>>,
    /// The sections to run, comma-separated [default: all]; memory includes shared watches.
    #[arg(
        long,
        value_name = "SECTION[,SECTION..]",
        value_delimiter = ',',
        value_parser = section
    )]
    sections: Option<Vec<String>>,
}

impl Cli {
    /// The options to run with: the preset, with every option given replacing its figure.
    pub fn into_options(self) -> Options {
        let mut options = preset(self.quick, self.smoke);
        options.json = self.json;
        options.repeats = self.repeats.unwrap_or(options.repeats);
        options.startup_objects = self.startup_objects.unwrap_or(options.startup_objects);
        options.memory_objects = self.memory_objects.unwrap_or(options.memory_objects);
        options.throughput_objects = self
            .throughput_objects
            .unwrap_or(options.throughput_objects);
        options.idle_contexts = self.idle_contexts.unwrap_or(options.idle_contexts);
        options.latency_seconds = self.latency_seconds.unwrap_or(options.latency_seconds);
        options.link_rtt_ms = self.link_rtt_ms.unwrap_or(options.link_rtt_ms);
        options.sections = self.sections.unwrap_or(options.sections);
        let fleet = &mut options.fleet;
        fleet.parents = self.fleet_parents.unwrap_or(fleet.parents);
        fleet.scale = self.fleet_scale.unwrap_or(std::mem::take(&mut fleet.scale));
        fleet.clusters = self.fleet_clusters.unwrap_or(fleet.clusters);
        fleet.namespaces = self.fleet_namespaces.unwrap_or(fleet.namespaces);
        let members = &mut options.members;
        members.parents = self.member_parents.unwrap_or(members.parents);
        members.joins = self.member_joins.unwrap_or(members.joins);
        members.churn_objects = self.churn_objects.unwrap_or(members.churn_objects);
        members.churn_cycles = self.churn_cycles.unwrap_or(members.churn_cycles);
        options.fairness.flood = self.fairness_flood.unwrap_or(options.fairness.flood);
        members.many = self.members.unwrap_or(std::mem::take(&mut members.many));
        options
    }
}

/// The driver's full sizes, or its `--quick` or `--smoke` ones.
fn preset(quick: bool, smoke: bool) -> Options {
    if smoke {
        Options::smoke()
    } else if quick {
        Options::quick()
    } else {
        Options::full()
    }
}

fn positive() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// One of the sections, which the full preset runs all of.
fn section(name: &str) -> Result<String, String> {
    let all = preset(false, false).sections;
    if all.iter().any(|s| s == name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "no section {name:?} (sections: {})",
            all.join(", ")
        ))
    }
}

/// The driver's note on `KUBEPLEX_BENCH_CHILD_WRAPPER`, the paragraph after its usage line.
fn child_wrapper_note() -> String {
    let note = options::USAGE
        .split_once("\n\n")
        .map_or("", |(_, note)| note);
    // clap turns `{n}` in help text into a line break and has no escape; an empty style between the
    // brace and the `n` keeps the wrapper's placeholder as written (styles vanish in plain output).
    note.replace("{n}", &format!("{{{}n}}", Reset.render()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubeplex-bench").chain(args.iter().copied()))
            .map(Cli::into_options)
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_options_is_the_full_preset_and_quick_the_quick_one() {
        let full = parse(&[]).unwrap();
        assert!(!full.quick);
        assert_eq!(full.repeats, preset(false, false).repeats);
        assert_eq!(full.sections, preset(false, false).sections);
        let quick = parse(&["--quick"]).unwrap();
        assert!(quick.quick);
        assert_eq!(
            quick.throughput_objects,
            preset(true, false).throughput_objects
        );
        assert_ne!(quick.throughput_objects, full.throughput_objects);
    }

    #[test]
    fn options_replace_the_preset_figures() {
        let options = parse(&[
            "--quick",
            "--json",
            "/tmp/bench.json",
            "--repeats",
            "3",
            "--startup-objects",
            "7",
            "--memory-objects",
            "8",
            "--throughput-objects",
            "9",
            "--idle-contexts",
            "5,15",
            "--latency-seconds",
            "4",
            "--link-rtt-ms",
            "100",
            "--sections",
            "startup_remote,throughput",
        ])
        .unwrap();
        assert!(options.quick);
        assert_eq!(options.json, Some(PathBuf::from("/tmp/bench.json")));
        assert_eq!(
            (
                options.repeats,
                options.startup_objects,
                options.memory_objects,
                options.throughput_objects
            ),
            (3, 7, 8, 9)
        );
        assert_eq!(options.idle_contexts, [5, 15]);
        assert_eq!((options.latency_seconds, options.link_rtt_ms), (4, 100));
        assert_eq!(options.sections, ["startup_remote", "throughput"]);
    }

    #[test]
    fn fleet_options_replace_the_fleet_preset() {
        let options = parse(&[
            "--fleet-parents",
            "50",
            "--fleet-scale",
            "10,20",
            "--fleet-clusters",
            "3",
            "--fleet-namespaces",
            "1",
        ])
        .unwrap();
        let fleet = &options.fleet;
        assert_eq!(
            (
                fleet.parents,
                &fleet.scale[..],
                fleet.clusters,
                fleet.namespaces
            ),
            (50, &[10, 20][..], 3, 1)
        );
        assert_eq!(parse(&["--quick"]).unwrap().fleet.parents, 100);
        let error = parse(&["--fleet-clusters", "4"]).unwrap_err().to_string();
        assert!(error.contains("--fleet-clusters <C>"), "{error}");
    }

    #[test]
    fn member_options_replace_the_member_preset() {
        let options = parse(&[
            "--quick",
            "--member-parents",
            "7",
            "--member-joins",
            "3",
            "--churn-objects",
            "50",
            "--churn-cycles",
            "4",
            "--sections",
            "member_join,member_churn",
        ])
        .unwrap();
        let members = &options.members;
        assert_eq!(
            (
                members.parents,
                members.joins,
                members.churn_objects,
                members.churn_cycles
            ),
            (7, 3, 50, 4)
        );
        assert_eq!(options.sections, ["member_join", "member_churn"]);
        let quick = parse(&["--quick"]).unwrap().members;
        assert_eq!((quick.parents, quick.joins), (20, 2));
        let full = parse(&[]).unwrap().members;
        assert_eq!((full.churn_objects, full.churn_cycles), (1000, 10));
    }

    #[test]
    fn the_flood_replaces_the_fairness_preset() {
        assert_eq!(parse(&[]).unwrap().fairness.flood, 10_000);
        assert_eq!(parse(&["--quick"]).unwrap().fairness.flood, 1000);
        let options = parse(&[
            "--quick",
            "--fairness-flood",
            "300",
            "--sections",
            "fairness",
        ])
        .unwrap();
        assert_eq!(options.fairness.flood, 300);
        assert_eq!(options.sections, ["fairness"]);
    }

    #[test]
    fn members_replace_the_many_members_preset() {
        let options = parse(&["--quick", "--members", "5,10,40"]).unwrap();
        assert_eq!(options.members.many, [5, 10, 40]);
        assert_eq!(parse(&["--quick"]).unwrap().members.many, [20, 50]);
        assert_eq!(parse(&[]).unwrap().members.many, [100, 300, 1000]);
        let error = parse(&["--members", "0"]).unwrap_err().to_string();
        assert!(error.contains("--members <M[,M..]>"), "{error}");
    }

    #[test]
    fn smoke_is_its_own_preset_options_replace_its_figures_and_quick_is_refused_with_it() {
        let smoke = parse(&["--smoke"]).unwrap();
        assert!(smoke.smoke && !smoke.quick);
        assert_eq!(smoke.repeats, 1);
        assert_eq!(smoke.sections, preset(false, false).sections);
        assert_eq!(smoke.members.many, Options::smoke().members.many);
        assert!(smoke.fleet.parents < parse(&["--quick"]).unwrap().fleet.parents);
        let options = parse(&["--smoke", "--repeats", "2", "--fleet-parents", "20"]).unwrap();
        assert!(options.smoke);
        assert_eq!((options.repeats, options.fleet.parents), (2, 20));
        assert_eq!(options.fleet.scale, smoke.fleet.scale);
        let error = parse(&["--smoke", "--quick"]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ArgumentConflict);
        assert!(error.to_string().contains("--quick"), "{error}");
    }

    #[test]
    fn bad_values_name_the_option() {
        let cases: [(&[&str], &str); 4] = [
            (&["--sections", "startup,memroy"], "no section \"memroy\""),
            (&["--repeats", "0"], "--repeats <R>"),
            (&["--idle-contexts", "10,x"], "--idle-contexts <C[,C..]>"),
            (&["--frobnicate"], "--frobnicate"),
        ];
        for (args, expected) in cases {
            let error = parse(args).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}");
            let message = error.to_string();
            assert!(message.contains(expected), "{args:?}: {message}");
        }
        let sections = parse(&["--sections", "memroy"]).unwrap_err().to_string();
        assert!(sections.contains("many_contexts"), "the list: {sections}");
    }

    #[test]
    fn help_goes_to_stdout_with_the_child_wrapper_note() {
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.kind(), ErrorKind::DisplayHelp);
        assert_eq!(help.exit_code(), 0);
        assert!(!help.use_stderr());
        let text = help.to_string();
        assert!(text.contains("KUBEPLEX_BENCH_CHILD_WRAPPER"), "{text}");
        assert!(text.contains("/tmp/child-{n}.data"), "{text}");
        assert!(text.contains("--link-rtt-ms <MS>"), "{text}");
    }
}
