//! `kubeplex-bench`: kubeplex against a plain kube-runtime `Controller`, on real local API servers.
//!
//! ```text
//! cargo run --release -p kubeplex-bench -- [--quick] [--json PATH] [--repeats R] [--startup-objects N]
//!     [--memory-objects N] [--throughput-objects N] [--idle-contexts C] [--latency-seconds S]
//! ```
//!
//! The parent process starts three `kubeplex-testenv` clusters, creates the objects, then runs every
//! measurement in a fresh child process (this binary re-executed with the hidden `__child` subcommand), so
//! that RSS and heap are attributable to one side. Baseline and kubeplex runs alternate.

mod alloc;
mod child;
mod cpu;
mod driver;
mod link;
mod machine;
mod stats;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

use std::process::ExitCode;
use std::time::Instant;

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
    let options = match driver::Options::parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("kubeplex-bench: {message}\n\n{}", driver::USAGE);
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(driver::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kubeplex-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
