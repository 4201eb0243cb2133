//! `kubeplex-bench`: kubeplex against a plain kube-runtime `Controller`, on real local API servers.
//!
//! ```text
//! cargo run --release -p kubeplex-bench -- [--quick] [--json PATH] [--repeats R] [--startup-objects N]
//!     [--memory-objects N] [--throughput-objects N] [--idle-contexts C[,C..]] [--latency-seconds S]
//!     [--link-rtt-ms MS] [--sections SECTION[,SECTION..]]
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
    if args.first().map(String::as_str) == Some("__child") {
        let Some(spec) = args.get(1) else {
            eprintln!("kubeplex-bench __child: missing the spec");
            return ExitCode::from(2);
        };
        return match runtime.block_on(child::main(started, spec)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("kubeplex-bench __child: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("__fleet") {
        let Some(spec) = args.get(1) else {
            eprintln!("kubeplex-bench __fleet: missing the spec");
            return ExitCode::from(2);
        };
        return match runtime.block_on(fleet::main(started, spec)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("kubeplex-bench __fleet: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("__child_cache") {
        let Some(spec) = args.get(1) else {
            eprintln!("kubeplex-bench __child_cache: missing the spec");
            return ExitCode::from(2);
        };
        return match runtime.block_on(child_cache::main(started, spec)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("kubeplex-bench __child_cache: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("__fairness") {
        let Some(spec) = args.get(1) else {
            eprintln!("kubeplex-bench __fairness: missing the spec");
            return ExitCode::from(2);
        };
        return match runtime.block_on(fairness::main(started, spec)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("kubeplex-bench __fairness: {error}");
                ExitCode::FAILURE
            }
        };
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
