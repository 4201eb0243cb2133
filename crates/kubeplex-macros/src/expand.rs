//! What `#[controller]` generates from a validated [`Model`]: one `impl Controller` that *describes* the
//! controller (a `Plan` built with its builder), plus, when string contexts are checked against a fleet,
//! one `const` item that checks them while compiling. Every path is absolute through the crate root.

use proc_macro2::{Literal, TokenStream};
use proc_macro2::{Span, TokenTree};
use quote::quote;
use syn::LitStr;

use crate::parse::ContextItem;
use crate::validate::{ContextsKind, Model, path_string};

/// The generated items (the user's struct is emitted separately, always).
pub fn expand(model: &Model) -> TokenStream {
    let Model {
        krate,
        ident,
        resource,
        name,
        ..
    } = model;

    let context_type = match &model.contexts_kind {
        ContextsKind::Typed(fleet) | ContextsKind::NamedInFleet(fleet) => quote!(#fleet),
        ContextsKind::Named => quote!(#krate::ContextName),
    };

    let contexts = context_exprs(model, &model.contexts);
    let mut calls = vec![quote!(.contexts([#(#contexts),*]))];
    if !model.namespaces.is_empty() {
        let namespaces = &model.namespaces;
        calls.push(quote!(.namespaces([#(#namespaces),*])));
    }
    if let Some(selector) = &model.label_selector {
        calls.push(quote!(.label_selector(#selector)));
    }
    if let Some(selector) = &model.field_selector {
        calls.push(quote!(.field_selector(#selector)));
    }
    if let Some(limit) = model.concurrency {
        let limit = Literal::u16_unsuffixed(limit);
        calls.push(quote!(.concurrency(#limit)));
    }
    for (method, value) in [
        (quote!(debounce), model.debounce),
        (quote!(requeue_after), model.requeue_after),
        (quote!(error_requeue), model.error_requeue),
        (
            quote!(abandon_unreachable_after),
            model.abandon_unreachable_after,
        ),
    ] {
        if let Some(ms) = value {
            let ms = Literal::u64_unsuffixed(ms);
            calls.push(quote!(.#method(::core::time::Duration::from_millis(#ms))));
        }
    }
    if let Some(finalizer) = &model.finalizer {
        calls.push(quote!(.finalizer(#finalizer)));
    }
    for child in &model.children {
        let kind = &child.kind;
        let contexts = context_exprs(model, &child.contexts);
        let namespaces = (!child.namespaces.is_empty()).then(|| {
            let namespaces = &child.namespaces;
            quote!(.namespaces([#(#namespaces),*]))
        });
        calls.push(quote! {
            .owns(#krate::Child::of::<#kind>().contexts([#(#contexts),*]) #namespaces)
        });
    }

    let membership = membership_check(model);

    quote! {
        impl #krate::Controller for #ident {
            type Resource = #resource;
            type Context = #context_type;
            fn plan() -> #krate::Plan<Self::Context> {
                #krate::Plan::new(#name) #(#calls)*
            }
        }
        #membership
    }
}

/// The expressions of a context list, each keeping the span of what the user wrote so that rustc's
/// errors (and its "there is a variant with a similar name" suggestion) point at it.
fn context_exprs(model: &Model, items: &[ContextItem]) -> Vec<TokenStream> {
    let krate = &model.krate;
    items
        .iter()
        .map(|item| match (item, &model.contexts_kind) {
            (ContextItem::Typed(path), _) => quote!(#path),
            (ContextItem::Named(name), ContextsKind::NamedInFleet(fleet)) => {
                quote!(#krate::__private::member::<#fleet>(#name))
            }
            (ContextItem::Named(name), _) => quote!(#krate::ContextName::new(#name)),
        })
        .collect()
}

/// For `fleet = F` with string contexts: a `const` that fails to compile, at the offending literal and
/// with a "did you mean", when a name is not one of `F`'s.
fn membership_check(model: &Model) -> TokenStream {
    let ContextsKind::NamedInFleet(fleet) = &model.contexts_kind else {
        return TokenStream::new();
    };
    let krate = &model.krate;
    let fleet_name = path_string(fleet);
    let names: Vec<&LitStr> = model
        .contexts
        .iter()
        .chain(model.children.iter().flat_map(|c| c.contexts.iter()))
        .filter_map(|item| match item {
            ContextItem::Named(name) => Some(name),
            ContextItem::Typed(_) => None,
        })
        .collect();
    // Every token of a check is located at its literal, so that a failure points there.
    let checks = names.iter().map(|name| {
        respan(
            quote! { #krate::__private::check_members::<#fleet>(#fleet_name, &[#name]); },
            name.span(),
        )
    });
    quote! {
        const _: () = { #(#checks)* };
    }
}

/// The tokens, each located at `span` (keeping how its names resolve).
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|tree| match tree {
            TokenTree::Group(group) => {
                let mut new =
                    proc_macro2::Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(group.span().located_at(span));
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(other.span().located_at(span));
                other
            }
        })
        .collect()
}
