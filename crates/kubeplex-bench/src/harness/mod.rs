//! What every section shares: the running benchmark, its clusters, and the child processes it runs on
//! both sides.

mod bench;

pub(crate) use bench::{Bench, CLUSTERS, contexts, create_namespace, figure, progress};
