//! The runtime's structure, checked from its sources: the folders' layer order (`folders`) and no circle of
//! imports between files (`files`).

mod files;
mod folders;
