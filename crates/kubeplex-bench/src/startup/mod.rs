//! Sections `startup` and `startup_remote`: time to synced, against the API servers directly or through
//! delayed links.

mod link;
mod synced;

pub(crate) use synced::{startup_over, startup_remote};
