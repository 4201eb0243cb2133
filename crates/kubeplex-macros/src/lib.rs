//! The `#[controller]` attribute of kubeplex. Use it through the `kubeplex` crate, which re-exports it as
//! `kubeplex::controller` (and in `kubeplex::prelude`); its documentation and every key are described
//! there and in `docs/controller-attribute.md`.
//!
//! The attribute is three steps: `parse/` (the grammar, with darling), `validate/` (what the values
//! mean: one `check_*` per rule, every error collected and spanned; the string rules in `rules/`) and
//! `expand.rs` (the generated `impl Controller`, or a fallback when there are errors). `contexts.rs` is
//! `kubeplex::contexts!`, which forwards to the `contexts` macro here.
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod attribute;
mod contexts;
mod expand;
mod parse;
mod rules;
mod validate;

/// Describes a multi-cluster controller: implements `kubeplex::Controller` for the struct it is on.
///
/// ```ignore
/// #[controller(crd = AppDeployment, contexts = [Fleet::Control], namespaces = ["crds"])]
/// pub struct AppDeployer;
/// ```
///
/// See the `kubeplex` crate for the keys and an example that compiles.
#[proc_macro_attribute]
pub fn controller(args: TokenStream, item: TokenStream) -> TokenStream {
    attribute::controller_impl(args.into(), item.into()).into()
}

/// The implementation of `kubeplex::contexts!`, which forwards here with its own path first:
/// `contexts!($crate; pub enum Fleet { Control = "control", .. })`. Use `kubeplex::contexts!`.
#[doc(hidden)]
#[proc_macro]
pub fn contexts(input: TokenStream) -> TokenStream {
    contexts::contexts(input.into()).into()
}
