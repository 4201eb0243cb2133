//! One section of the report and the goals it is judged against.

use serde::Serialize;

use super::stats::Figure;

/// One section of the report.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Section {
    pub(crate) title: String,
    pub(crate) method: String,
    pub(crate) figures: Vec<Figure>,
    pub(crate) notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Goal {
    pub(crate) section: &'static str,
    pub(crate) goal: String,
    pub(crate) measured: String,
    pub(crate) met: bool,
}
