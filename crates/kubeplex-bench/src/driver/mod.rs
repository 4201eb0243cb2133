//! The parent: starts the clusters, creates the objects, runs each section and reports.

mod run;
mod seed;

pub(crate) use run::run;
