//! Section `fairness`: one context floods the controller with changes while a quiet one changes one object
//! every period; the quiet context's event -> reconcile latency during the flood against without it, for
//! the baseline and for kubeplex's dispatch orders. Each run is a `__fairness` process.

mod probe;
mod process;
mod report;
mod section;
mod spec;

pub(crate) use process::main;
pub(crate) use section::run;
pub(crate) use spec::FairnessOptions;
