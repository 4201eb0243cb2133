//! Sections `member_join` and `member_churn`: a fourth cluster joins the fleet by its kubeconfig Secret
//! and leaves again, timed and checked for leaks; `many_members`: M members, aliases of the test clusters.

mod aliases;
mod churn;
mod cluster;
mod fleet;
mod join;
mod many;
mod many_report;

pub(crate) use aliases::answered_total;
pub(crate) use churn::run as churn;
pub(crate) use cluster::{MemberCluster, MemberOptions};
pub(crate) use join::run as join;
pub(crate) use many::{pings, run as many};
