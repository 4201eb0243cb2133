//! What `#[controller]` generates from a validated [`Model`]: one `impl Controller` that *describes* the
//! controller (a `Plan` built with its builder), `const` items before it that check the types the
//! attribute names, and, when string contexts are checked against a fleet, one `const` item that checks
//! them while compiling. With errors, [`fallback`] instead. Every path is absolute through the crate root.

use proc_macro2::{Literal, Span, TokenStream, TokenTree};
use quote::quote;
use syn::spanned::Spanned;
use syn::{LitStr, Type};

use crate::parse::ContextItem;
use crate::validate::{
    ContextsKind, Model, WatchModel, fleet_of, is_dynamic, path_string, path_type,
};

/// The generated items for a controller without errors (the user's struct is emitted separately, always).
pub fn expand(model: &Model) -> TokenStream {
    let krate = &model.krate;
    let ident = &model.self_ty;
    let name = &model.name;
    let (Some(resource), Some(kind)) = (&model.resource, &model.contexts_kind) else {
        // Unreachable: a model without errors has both; the fallback copes with either missing.
        return fallback(model);
    };
    let context_type = context_type(model, kind);
    let resource_item = resource_item(resource);

    let mut calls = Vec::new();
    if !model.namespaces.is_empty() {
        let namespaces = &model.namespaces;
        calls.push(quote!(.with_namespaces([#(#namespaces),*])));
    }
    if model.members {
        calls.push(quote!(.members()));
    }
    if model.ignore_readiness_flips {
        calls.push(quote!(.ignore_readiness_flips()));
    }
    if let Some(selector) = &model.label_selector {
        calls.push(quote!(.with_label_selector(#selector)));
    }
    if let Some(selector) = &model.field_selector {
        calls.push(quote!(.with_field_selector(#selector)));
    }
    if let Some(limit) = model.concurrency {
        let limit = Literal::u16_unsuffixed(limit);
        calls.push(quote!(.with_concurrency(#limit)));
    }
    if let Some(limit) = model.concurrency_per_cluster {
        let limit = Literal::u16_unsuffixed(limit);
        calls.push(quote!(.with_concurrency_per_cluster(#limit)));
    }
    for (method, value) in [
        (quote!(with_debounce), model.debounce),
        (quote!(with_requeue_after), model.requeue_after),
        (quote!(with_error_requeue), model.error_requeue),
        (
            quote!(with_abandon_unreachable_after),
            model.abandon_unreachable_after,
        ),
        (
            quote!(with_abandon_terminating_after),
            model.abandon_terminating_after,
        ),
    ] {
        if let Some(ms) = value {
            let ms = Literal::u64_unsuffixed(ms);
            calls.push(quote!(.#method(::core::time::Duration::from_millis(#ms))));
        }
    }
    if let Some(finalizer) = &model.finalizer {
        calls.push(quote!(.with_finalizer(#finalizer)));
    }
    for child in &model.children {
        let kind = &child.kind;
        // Children only in the members have no `.contexts(..)`: the context type is the plan's, inferred
        // from `Plan::owns`. Contexts last, as the plan's (below).
        let contexts = (!child.contexts.is_empty()).then(|| {
            let contexts = context_exprs(model, &child.contexts);
            quote!(.with_contexts([#(#contexts),*]))
        });
        let members = child.members.then(|| quote!(.members()));
        let namespaces = (!child.namespaces.is_empty()).then(|| {
            let namespaces = &child.namespaces;
            quote!(.with_namespaces([#(#namespaces),*]))
        });
        let keep = child.keep_on_prune.then(|| quote!(.keep_on_prune()));
        let orphan = child.orphan_on_delete.then(|| quote!(.orphan_on_delete()));
        let health = child
            .health
            .as_ref()
            .map(|rule| quote!(.with_health(#rule)));
        let shared = child.shared.then(|| quote!(.shared()));
        calls.push(quote! {
            .owns(#krate::Child::of::<#kind>() #members #namespaces #keep #orphan #health #shared #contexts)
        });
    }

    for watch in &model.watches {
        calls.push(watch_call(model, watch));
    }

    // The primary's contexts last: were the fleet not declared with `contexts!` (reported by `type
    // Context`), the calls after them would each also be reported, for a `Plan<Fleet>`.
    let contexts = context_exprs(model, &model.contexts);
    calls.push(quote!(.with_contexts([#(#contexts),*])));

    let checks = checks(model);
    let membership = membership_check(model);

    quote! {
        #checks
        impl #krate::Controller for #ident {
            #resource_item
            type Context = #context_type;
            fn plan() -> #krate::Plan<Self::Context> {
                #krate::Plan::new(#name) #(#calls)*
            }
        }
        #membership
    }
}

/// `.watches(Watch::..)` for one `watches(..)`. A map function is given to `Watch::mapped` with the kind
/// and the controller's primary named, so that a function of another signature is reported at its path
/// with the signature expected.
fn watch_call(model: &Model, watch: &WatchModel) -> TokenStream {
    let krate = &model.krate;
    let kind = &watch.kind;
    let new = match &watch.map {
        Some(map) => {
            quote!(#krate::plan::Watch::mapped::<#kind, <Self as #krate::Controller>::Resource>(#map))
        }
        None => quote!(#krate::plan::Watch::of::<#kind>()),
    };
    let members = watch.members.then(|| quote!(.members()));
    let namespaces = (!watch.namespaces.is_empty()).then(|| {
        let namespaces = &watch.namespaces;
        quote!(.with_namespaces([#(#namespaces),*]))
    });
    let labels = (watch.label_selector.as_ref()).map(|s| quote!(.with_label_selector(#s)));
    let fields = (watch.field_selector.as_ref()).map(|s| quote!(.with_field_selector(#s)));
    let contexts = (!watch.contexts.is_empty()).then(|| {
        let contexts = context_exprs(model, &watch.contexts);
        quote!(.with_contexts([#(#contexts),*]))
    });
    quote!(.watches(#new #members #namespaces #labels #fields #contexts))
}

/// What is emitted when the attribute has errors (which are emitted next to it): the type checks, so that
/// every type the attribute names is still used and checked, and, when the resource and context types
/// are known, an `impl Controller` whose `plan` is never run, so that the user's `impl Reconcile` is not
/// also reported for a missing `Controller`.
pub fn fallback(model: &Model) -> TokenStream {
    let krate = &model.krate;
    let ident = &model.self_ty;
    let checks = checks(model);
    let (Some(resource), Some(kind)) = (&model.resource, &model.contexts_kind) else {
        return checks;
    };
    if is_dynamic(resource) {
        return checks;
    }
    let context_type = context_type(model, kind);
    let resource_item = resource_item(resource);
    // Typed contexts are still resolved, so that a misspelled variant is reported with the other errors.
    let typed = model
        .contexts
        .iter()
        .chain(model.children.iter().flat_map(|c| c.contexts.iter()))
        .chain(model.watches.iter().flat_map(|w| w.contexts.iter()))
        .filter_map(|item| match (item, kind) {
            (ContextItem::Typed(path), ContextsKind::Typed(fleet))
                if fleet_of(path).is_some_and(|f| path_string(&f) == path_string(fleet)) =>
            {
                Some(path)
            }
            _ => None,
        });
    quote! {
        #checks
        impl #krate::Controller for #ident {
            #resource_item
            type Context = #context_type;
            fn plan() -> #krate::Plan<Self::Context> {
                #(let _ = #typed;)*
                ::core::unreachable!("#[controller] was rejected at compile time")
            }
        }
    }
}

/// `type Resource = ..;`, located at the type the user wrote: rustc's errors about it (a private type under
/// a public controller) then point at `crd = ..` rather than at the whole attribute.
fn resource_item(resource: &Type) -> TokenStream {
    let span = resource.span();
    let open = respan(quote!(type Resource =), span);
    let semi = respan(quote!(;), span);
    quote!(#open #resource #semi)
}

/// Uses the types of a rejected attribute, so that their imports are not also reported unused.
pub fn uses(types: &[Type]) -> TokenStream {
    if types.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            fn kinds(_: ::core::marker::PhantomData<(#(#types,)*)>) {}
        };
    }
}

/// `type Context`.
fn context_type(model: &Model, kind: &ContextsKind) -> TokenStream {
    let krate = &model.krate;
    match kind {
        // Through `__private::Fleet`, so that an enum written by hand is reported once (by that trait's
        // message) instead of also failing `Controller::Context`'s and `Plan::contexts`' bounds.
        ContextsKind::Typed(fleet) | ContextsKind::NamedInFleet(fleet) => {
            quote!(<#fleet as #krate::__private::Fleet>::Itself)
        }
        ContextsKind::Named => quote!(#krate::ContextName),
    }
}

/// Checks, placed before the `impl` so that rustc reports them first, that every kind is a resource type
/// (and a namespaced one where `namespaces` is given). That a fleet was declared with `contexts!` is checked
/// by `type Context` itself (see [`context_type`]).
/// Each kind check is the well-formedness of a function signature, the namespaced checks one block of
/// method calls ([`namespaced_check`]); all are reported with kubeplex's `#[diagnostic::on_unimplemented]`
/// messages at the user's tokens.
fn checks(model: &Model) -> TokenStream {
    let mut checks = Vec::new();
    let mut namespaced = Vec::new();
    if let Some(resource) = &model.resource {
        checks.push(kind_check(model, resource));
        namespaced.extend(model.namespaces_key.map(|key| (resource.clone(), key)));
    }
    for child in &model.children {
        let kind = path_type(&child.kind);
        checks.push(kind_check(model, &kind));
        namespaced.extend(child.namespaces_key.map(|key| (kind, key)));
    }
    for watch in &model.watches {
        let kind = path_type(&watch.kind);
        checks.push(kind_check(model, &kind));
        namespaced.extend(watch.namespaces_key.map(|key| (kind, key)));
    }
    let namespaced = namespaced_check(model, &namespaced);
    quote!(#(#checks)* #namespaced)
}

/// The check of one kind: `<K as Resource>::Itself` is well-formed only for a resource type. A name
/// ending in `Spec` gets its own trait, whose message suggests the name without it.
fn kind_check(model: &Model, kind: &Type) -> TokenStream {
    let krate = &model.krate;
    let span = kind.span();
    if is_dynamic(kind) {
        // Already reported by `check_kind_is_static`; only keep the type used.
        return quote! {
            const _: () = {
                fn kind(_: ::core::marker::PhantomData<#kind>) {}
            };
        };
    }
    let spec_hint = spec_suggestion(kind);
    let trait_path = match spec_hint {
        Some(_) => quote!(Resource),
        None => quote!(#krate::__private::Resource),
    };
    let itself = respan(quote!(<#kind as #trait_path>::Itself), span);
    let local_trait = spec_hint.map(|(written, suggested)| {
        let message = format!(
            "`{written}` is not a Kubernetes resource type; did you mean `{suggested}`?"
        );
        let note = format!(
            "`#[derive(CustomResource)]` on the spec struct `{written}` generates the resource type named after its `kind` (usually `{suggested}`); `crd` and `owns` take that type"
        );
        quote! {
            #[diagnostic::on_unimplemented(message = #message, label = "a spec struct, not a resource", note = #note)]
            trait Resource {
                type Itself;
            }
            #[diagnostic::do_not_recommend]
            impl<K: #krate::__private::KubeResource<DynamicType = ()>> Resource for K {
                type Itself = K;
            }
        }
    });
    quote! {
        const _: () = {
            #local_trait
            fn kind(_: #itself) {}
        };
    }
}

/// For the kinds given `namespaces`: each is namespaced, reported at its `namespaces` key. Checked only for
/// resource types (the inherent `namespaced` applies to those; the trait's, a no-op, to any other type),
/// so that a type that is not a resource is reported once, by [`kind_check`], at the type.
fn namespaced_check(model: &Model, kinds: &[(Type, Span)]) -> TokenStream {
    let krate = &model.krate;
    let calls: Vec<TokenStream> = kinds
        .iter()
        .filter(|(kind, _)| !is_dynamic(kind))
        .map(|(kind, key)| {
            respan(
                quote!(Kind::<#kind>(::core::marker::PhantomData).namespaced();),
                *key,
            )
        })
        .collect();
    if calls.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            struct Kind<K>(::core::marker::PhantomData<K>);
            impl<K: #krate::__private::KubeResource> Kind<K> {
                fn namespaced(&self) where K::Scope: #krate::__private::NamespacedScope<K> {}
            }
            trait NotAResource {
                fn namespaced(&self) {}
            }
            impl<K> NotAResource for Kind<K> {}
            fn namespaced() {
                #(#calls)*
            }
        };
    }
}

/// For a type path whose last segment ends in `Spec` (`AppDeploymentSpec`): the name as written and
/// without the suffix.
fn spec_suggestion(kind: &Type) -> Option<(String, String)> {
    let Type::Path(path) = kind else { return None };
    let last = path.path.segments.last()?.ident.to_string();
    let stem = last.strip_suffix("Spec").filter(|stem| !stem.is_empty())?;
    Some((last.clone(), stem.to_owned()))
}

/// The expressions of a context list, each keeping the span of what the user wrote so that rustc's
/// errors (and its "there is a variant with a similar name" suggestion) point at it.
fn context_exprs(model: &Model, items: &[ContextItem]) -> Vec<TokenStream> {
    let krate = &model.krate;
    items
        .iter()
        .map(|item| match (item, &model.contexts_kind) {
            (ContextItem::Typed(path), _) => quote!(#path),
            (ContextItem::Named(name), Some(ContextsKind::NamedInFleet(fleet))) => {
                quote!(#krate::__private::member::<#fleet>(#name))
            }
            (ContextItem::Named(name), _) => quote!(#krate::ContextName::new(#name)),
        })
        .collect()
}

/// For `fleet = F` with string contexts: a `const` that fails to compile, at the offending literal and
/// with a "did you mean", when a name is not one of `F`'s.
fn membership_check(model: &Model) -> TokenStream {
    let Some(ContextsKind::NamedInFleet(fleet)) = &model.contexts_kind else {
        return TokenStream::new();
    };
    let krate = &model.krate;
    let fleet_name = path_string(fleet);
    let names: Vec<&LitStr> = model
        .contexts
        .iter()
        .chain(model.children.iter().flat_map(|c| c.contexts.iter()))
        .chain(model.watches.iter().flat_map(|w| w.contexts.iter()))
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
