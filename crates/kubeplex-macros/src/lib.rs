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

mod contexts;
mod expand;
mod parse;
mod rules;
mod validate;

#[cfg(test)]
mod snapshots;

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
    controller_impl(args.into(), item.into()).into()
}

/// The attribute on `proc_macro2` tokens, so that unit tests and snapshots can run it.
fn controller_impl(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = darling::Error::accumulator();
    let args = parse::parse_args(args, &mut errors);
    let model = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(parsed) => validate::target(&parsed, &mut errors)
            .map(|target| validate::validate(args, &target.ident, &mut errors)),
        // Not an item at all: rustc reports the syntax error itself when the tokens are re-emitted.
        Err(_) => None,
    };
    let errors = errors.into_inner();
    let generated = match model {
        Some(model) if errors.is_empty() => expand::expand(&model),
        Some(model) => {
            let errors = darling::Error::multiple(errors).write_errors();
            let fallback = expand::fallback(&model);
            quote::quote!(#errors #fallback)
        }
        None if errors.is_empty() => proc_macro2::TokenStream::new(),
        None => darling::Error::multiple(errors).write_errors(),
    };
    // The user's item is always emitted unchanged, so that an error here does not cascade into
    // "cannot find type" errors elsewhere and IDEs keep seeing the struct.
    quote::quote! {
        #item
        #generated
    }
}

/// The implementation of `kubeplex::contexts!`, which forwards here with its own path first:
/// `contexts!($crate; pub enum Fleet { Control = "control", .. })`. Use `kubeplex::contexts!`.
#[doc(hidden)]
#[proc_macro]
pub fn contexts(input: TokenStream) -> TokenStream {
    contexts::contexts(input.into()).into()
}
