//! What a section reports: min / median / max over repeats, baseline-vs-kubeplex figures, and the goals
//! they are judged against.

mod section;
mod stats;

pub(crate) use section::{Goal, Section};
pub(crate) use stats::{Figure, Spread, linear_fit, percentile};
