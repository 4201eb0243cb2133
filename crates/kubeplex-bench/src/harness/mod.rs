//! What every section shares: the running benchmark, its clusters, and the child processes it runs on
//! both sides.

mod bench;
mod process;

pub(crate) use bench::{Bench, CLUSTERS, contexts, create_namespace, figure, jitter, progress};
pub(crate) use process::{answer, command, operator_metrics, wait_started};
