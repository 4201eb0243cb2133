//! The attribute on `proc_macro2` tokens: parse, validate, expand; the entry point in `lib.rs` and the unit
//! tests (`tests/unit`) call it.

use crate::{expand, parse, validate};

/// The attribute on `proc_macro2` tokens, so that unit tests and snapshots can run it.
pub(crate) fn controller_impl(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = darling::Error::accumulator();
    let args = parse::parse_args(args, &mut errors);
    let mut item = item;
    let model = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(parsed) => match validate::target(&parsed, &mut errors) {
            Some(target) => {
                // A second `#[controller]` below this one would implement `Controller` again: it is
                // reported here and taken off the item, so that it does not also expand.
                if let Some((single, kinds)) = validate::one_controller(target, &mut errors) {
                    item = quote::ToTokens::to_token_stream(&single);
                    item.extend(expand::uses(&kinds));
                }
                Some(validate::validate(args, &target.ident, &mut errors))
            }
            None => validate::reconcile_impl_self(&parsed).map(|(ident, self_ty)| {
                let mut model = validate::validate(args, &ident, &mut errors);
                model.self_ty = self_ty;
                model
            }),
        },
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
    // The user's item is always emitted (unchanged but for a repeated `#[controller]`), so that an error
    // here does not cascade into "cannot find type" errors elsewhere and IDEs keep seeing the struct.
    quote::quote! {
        #item
        #generated
    }
}
