//! `contexts!`: the enum of a fleet's contexts, each variant with its kubeconfig context name.
//!
//! A proc macro rather than `macro_rules!` so that each mistake is one error at its token (a variant or
//! a name declared twice, an invalid name), and the enum is still emitted, without the duplicates, so
//! that the rest of the crate does not fail too.

use darling::Error;
use kubeplex_names::context_name;
use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, Lit, LitStr, Token, Visibility, braced};

/// `$crate; #[attrs] pub enum Fleet { #[attrs] Variant = "name", .. }`.
struct Input {
    krate: TokenStream,
    attrs: Vec<Attribute>,
    vis: Visibility,
    ident: Ident,
    variants: Punctuated<Variant, Token![,]>,
}

/// `#[attrs] Variant = "name"`.
struct Variant {
    attrs: Vec<Attribute>,
    ident: Ident,
    name: Lit,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        // The path of kubeplex (`$crate`), passed by `kubeplex::contexts!`, up to the `;`.
        let mut krate = TokenStream::new();
        while !input.peek(Token![;]) {
            krate.extend([input.parse::<proc_macro2::TokenTree>()?]);
        }
        input.parse::<Token![;]>()?;
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![enum]>()?;
        let ident = input.parse()?;
        let body;
        braced!(body in input);
        let variants = body.parse_terminated(Variant::parse, Token![,])?;
        Ok(Input {
            krate,
            attrs,
            vis,
            ident,
            variants,
        })
    }
}

impl Parse for Variant {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let name = input.parse()?;
        Ok(Variant { attrs, ident, name })
    }
}

/// Expands `contexts!`.
pub fn contexts(input: TokenStream) -> TokenStream {
    let input = match syn::parse2::<Input>(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Error::accumulator();
    let kept = check_variants(&input, &mut errors);
    let generated = expand(&input, &kept);
    let errors = errors
        .finish()
        .err()
        .map(|e| e.write_errors())
        .unwrap_or_default();
    quote!(#generated #errors)
}

/// Checks each variant; returns the ones to emit (each variant and each name once).
fn check_variants<'a>(
    input: &'a Input,
    errors: &mut darling::error::Accumulator,
) -> Vec<(&'a Variant, LitStr)> {
    let mut kept: Vec<(&Variant, LitStr)> = Vec::new();
    if input.variants.is_empty() {
        errors.push(
            Error::custom(format!(
                "`{}` has no contexts; declare at least one: `Control = \"control\"`",
                input.ident
            ))
            .with_span(&input.ident),
        );
    }
    for variant in &input.variants {
        let Lit::Str(name) = &variant.name else {
            errors.push(
                Error::custom(format!(
                    "a context name is a string literal, the kubeconfig context's name: `{} = \"..\"`",
                    variant.ident
                ))
                .with_span(&variant.name),
            );
            continue;
        };
        if kept.iter().any(|(v, _)| v.ident == variant.ident) {
            errors.push(
                Error::custom(format!(
                    "variant `{}` is declared twice in `{}`; remove one",
                    variant.ident, input.ident
                ))
                .with_span(&variant.ident),
            );
            continue;
        }
        if let Err(why) = context_name(&name.value()) {
            errors.push(Error::custom(why).with_span(name));
            continue;
        }
        if let Some((first, _)) = kept.iter().find(|(_, n)| n.value() == name.value()) {
            errors.push(
                Error::custom(format!(
                    "context name {:?} is already the name of `{}::{}`; give each variant its own kubeconfig context name",
                    name.value(),
                    input.ident,
                    first.ident
                ))
                .with_span(name),
            );
            continue;
        }
        kept.push((variant, name.clone()));
    }
    kept
}

/// The enum and its impls, for the variants kept.
fn expand(input: &Input, kept: &[(&Variant, LitStr)]) -> TokenStream {
    let Input {
        krate,
        attrs,
        vis,
        ident,
        ..
    } = input;
    let variants: Vec<&Ident> = kept.iter().map(|(v, _)| &v.ident).collect();
    let names: Vec<&LitStr> = kept.iter().map(|(_, n)| n).collect();
    let declared = kept.iter().map(|(v, name)| {
        let attrs = &v.attrs;
        let ident = &v.ident;
        let doc = format!("The context `{}`.", name.value());
        quote!(#(#attrs)* #[doc = #doc] #ident)
    });
    let fleet = ident.to_string();
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        #vis enum #ident {
            #(#declared),*
        }

        impl #krate::Context for #ident {
            fn name(&self) -> &'static str {
                match *self { #(Self::#variants => #names),* }
            }
        }

        impl #krate::ContextSet for #ident {
            const ALL: &'static [Self] = &[#(Self::#variants),*];
            const NAMES: &'static [&'static str] = &[#(#names),*];
        }

        impl ::core::fmt::Display for #ident {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(#krate::Context::name(self))
            }
        }

        impl ::core::convert::TryFrom<&str> for #ident {
            type Error = #krate::__private::UnknownContext;
            fn try_from(name: &str) -> ::core::result::Result<Self, Self::Error> {
                match name {
                    #(#names => ::core::result::Result::Ok(Self::#variants),)*
                    _ => ::core::result::Result::Err(#krate::__private::UnknownContext::new(
                        name,
                        #fleet,
                        <Self as #krate::ContextSet>::NAMES,
                    )),
                }
            }
        }

        impl ::core::str::FromStr for #ident {
            type Err = #krate::__private::UnknownContext;
            fn from_str(name: &str) -> ::core::result::Result<Self, Self::Err> {
                <Self as ::core::convert::TryFrom<&str>>::try_from(name)
            }
        }
    }
}
