//! Section `child_cache`: the heap one cached child costs, cached by its metadata only or whole; each run
//! is a `__child_cache` process.

mod heap;
mod process;

pub(crate) use heap::{ChildCacheOptions, run};
pub(crate) use process::{main, settled};
