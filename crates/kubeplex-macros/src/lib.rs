//! The `#[controller]` attribute of kubeplex. Use it through the `kubeplex` crate.
