//! `kubeplex-bench`: kubeplex against a plain kube-runtime `Controller`, on real local API servers.
//!
//! ```text
//! cargo run --release -p kubeplex-bench -- [--quick | --smoke] [--json PATH] [--repeats R]
//!     [--startup-objects N] [--memory-objects N] [--throughput-objects N] [--idle-contexts C[,C..]]
//!     [--latency-seconds S] [--link-rtt-ms MS] [--sections SECTION[,SECTION..]]
//! ```
//!
//! `--help` lists them.
//!
//! The parent process starts three `kubeplex-testenv` clusters, creates the objects, then runs every
//! measurement in a fresh child process (this binary re-executed with the hidden `__child` subcommand), so
//! that RSS and heap are attributable to one side (`__fleet` for the fleet section's operators, which the
//! parent drives over stdin, and the failover section's replicas; `__child_cache` for the child-cache
//! section's; `__fairness` for the fairness section's). Baseline and kubeplex runs alternate. The member
//! sections start a fourth cluster, the member.

mod child;
mod child_cache;
mod config;
mod controller;
mod driver;
mod fairness;
mod figures;
mod fleet;
mod harness;
mod member;
mod report;
mod startup;
mod system;

#[global_allocator]
static ALLOCATOR: system::Counting = system::Counting;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser as _;

fn main() -> ExitCode {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kubeplex-bench: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let spec = args.get(1).map(String::as_str);
    match args.first().map(String::as_str) {
        Some(name @ "__child") => {
            return process(&runtime, name, spec, |s| child::main(started, s));
        }
        Some(name @ "__fleet") => {
            return process(&runtime, name, spec, |s| fleet::main(started, s));
        }
        Some(name @ "__child_cache") => {
            return process(&runtime, name, spec, |s| child_cache::main(started, s));
        }
        Some(name @ "__fairness") => {
            return process(&runtime, name, spec, |s| fairness::main(started, s));
        }
        _ => {}
    }
    // Parsed after the child's fast path above, which stays as it was: nothing added to what it measures.
    let options = config::Cli::parse().into_options();
    match runtime.block_on(driver::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kubeplex-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the measurement process `name` (this binary re-executed by a section) with its `spec`.
fn process<'a, F>(
    runtime: &tokio::runtime::Runtime,
    name: &str,
    spec: Option<&'a str>,
    main: impl FnOnce(&'a str) -> F,
) -> ExitCode
where
    F: Future<Output = Result<(), String>>,
{
    let Some(spec) = spec else {
        eprintln!("kubeplex-bench {name}: missing the spec");
        return ExitCode::from(2);
    };
    match runtime.block_on(main(spec)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kubeplex-bench {name}: {error}");
            ExitCode::FAILURE
        }
    }
}
