//! What the values of `#[controller(...)]` mean, checked: every error is collected (never just the first),
//! spanned at the offending token, and says how to fix it. The result is a [`Model`] for `expand.rs`; it is
//! built even when there are errors, so that the fallback expansion can still name the types.
//!
//! Each rule is one `check_*` function in `check.rs` (`watches.rs` checks a `watches(..)`); the string
//! rules behind them live in `rules/`.

mod check;
mod watches;

pub use watches::WatchModel;

use darling::Error;
use darling::error::Accumulator;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{Ident, Item, ItemStruct, LitStr, Path, Type};

use crate::parse::{ContextItem, ControllerArgs, Str};
use crate::rules::names::kebab_case;

/// A `#[controller]` as far as it could be understood. Without errors it is complete and expands to the
/// `impl Controller`; with errors, to the fallback (`expand::fallback`).
#[derive(Debug)]
pub struct Model {
    /// The path of the kubeplex crate.
    pub krate: TokenStream,
    /// The type `impl Controller` is for: the struct the attribute is on, or the self type of an
    /// `impl Reconcile` it was wrongly put on (for the fallback).
    pub self_ty: Type,
    /// The primary resource type.
    pub resource: Option<Type>,
    /// The key `namespaces` of the primary resource, if given (for the namespaced-kind check).
    pub namespaces_key: Option<Span>,
    /// How contexts are named (`None`: could not be decided).
    pub contexts_kind: Option<ContextsKind>,
    /// The primary resource's contexts.
    pub contexts: Vec<ContextItem>,
    /// `members`: the primary resource is also watched in every member.
    pub members: bool,
    /// `ignore_readiness_flips`: a cluster's readiness flip does not reconcile the parents.
    pub ignore_readiness_flips: bool,
    /// The controller's name.
    pub name: String,
    /// The primary resource's namespaces (empty: all).
    pub namespaces: Vec<LitStr>,
    /// `label_selector`.
    pub label_selector: Option<LitStr>,
    /// `field_selector`.
    pub field_selector: Option<LitStr>,
    /// `concurrency`.
    pub concurrency: Option<u16>,
    /// `concurrency_per_cluster`.
    pub concurrency_per_cluster: Option<u16>,
    /// `debounce`, in milliseconds.
    pub debounce: Option<u64>,
    /// `requeue_after`, in milliseconds.
    pub requeue_after: Option<u64>,
    /// `error_requeue`, in milliseconds.
    pub error_requeue: Option<u64>,
    /// `abandon_unreachable_after`, in milliseconds.
    pub abandon_unreachable_after: Option<u64>,
    /// `abandon_terminating_after`, in milliseconds.
    pub abandon_terminating_after: Option<u64>,
    /// `finalizer`.
    pub finalizer: Option<LitStr>,
    /// The `owns(..)` entries.
    pub children: Vec<ChildModel>,
    /// The `watches(..)` entries.
    pub watches: Vec<WatchModel>,
}

/// How a controller names its contexts; decides `type Context`.
#[derive(Debug, Clone)]
pub enum ContextsKind {
    /// `contexts = [Fleet::A]`: `type Context = Fleet`.
    Typed(Path),
    /// `fleet = Fleet, contexts = ["a"]`: `type Context = Fleet`, names checked at compile time.
    NamedInFleet(Path),
    /// `contexts = ["a"]`: `type Context = ContextName`.
    Named,
}

/// A validated `owns(..)`.
#[derive(Debug)]
pub struct ChildModel {
    /// The child kind.
    pub kind: Path,
    /// The contexts children live in (may be empty with `members`).
    pub contexts: Vec<ContextItem>,
    /// `members`: children also live in every member of the fleet.
    pub members: bool,
    /// Their namespaces (empty: all).
    pub namespaces: Vec<LitStr>,
    /// The key `namespaces` of this `owns`, if given.
    pub namespaces_key: Option<Span>,
    /// `prune = keep`: a child no longer declared is kept, unlinked.
    pub keep_on_prune: bool,
    /// `on_delete = orphan`: a child is left in place, unlinked, when the parent is deleted.
    pub orphan_on_delete: bool,
    /// `health = path`: the rule that judges a child's health, instead of the kind's built-in one.
    pub health: Option<Path>,
    /// `shared`: several parents may declare the same child.
    pub shared: bool,
}

/// Checks that the attribute is on a struct it supports; returns that struct.
pub fn target<'a>(item: &'a Item, errors: &mut Accumulator) -> Option<&'a ItemStruct> {
    let (what, span) = match item {
        Item::Struct(s) => {
            if !s.generics.params.is_empty() || s.generics.where_clause.is_some() {
                errors.push(
                    Error::custom(
                        "#[controller] does not support generic structs: a controller is one concrete type; \
                         remove the parameters (keep configuration in fields instead)",
                    )
                    .with_span(&s.generics),
                );
                return None;
            }
            return Some(s);
        }
        Item::Enum(e) => ("an enum", e.enum_token.span),
        Item::Union(u) => ("a union", u.union_token.span),
        Item::Fn(f) => ("a function", f.sig.fn_token.span),
        Item::Trait(t) => ("a trait", t.trait_token.span),
        Item::Impl(i) => ("an impl block", i.impl_token.span),
        Item::Mod(m) => ("a module", m.mod_token.span),
        Item::Type(t) => ("a type alias", t.type_token.span),
        other => ("this item", other.span()),
    };
    errors.push(
        Error::custom(format!(
            "#[controller] applies to a struct, not to {what}: put it on the struct that holds your reconciler's state, e.g. `struct MyController;`"
        ))
        .with_span(&span),
    );
    None
}

/// A struct is one controller: every further `#[controller]` on it (the attribute sees the attributes
/// below it) is reported at its path. Returns the struct without them, if there were any, and the kinds
/// they name (still used, so that their imports are not reported unused).
pub fn one_controller(
    target: &ItemStruct,
    errors: &mut Accumulator,
) -> Option<(ItemStruct, Vec<Type>)> {
    let is_controller = |attr: &syn::Attribute| {
        attr.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "controller")
    };
    if !target.attrs.iter().any(is_controller) {
        return None;
    }
    for attr in target.attrs.iter().filter(|a| is_controller(a)) {
        errors.push(
            Error::custom(format!(
                "one `#[controller]` per struct: `{}` already has the `#[controller]` above, and a struct implements `Controller` once; \
                 remove this one, or put it on a struct of its own for a second controller",
                target.ident
            ))
            .with_span(attr.path()),
        );
    }
    let mut kinds = Vec::new();
    for attr in target.attrs.iter().filter(|a| is_controller(a)) {
        if let syn::Meta::List(list) = &attr.meta {
            // Its own mistakes are not reported: the attribute is rejected as a whole.
            let mut ignored = Error::accumulator();
            let args = crate::parse::parse_args(list.tokens.clone(), &mut ignored);
            drop(ignored.into_inner());
            kinds.extend(args.crd.0);
            kinds.extend(args.owns.iter().map(|owns| path_type(&owns.kind)));
            kinds.extend(args.watches.iter().map(|watches| path_type(&watches.kind)));
        }
    }
    let mut single = target.clone();
    single.attrs.retain(|a| !is_controller(a));
    Some((single, kinds))
}

/// For an attribute put on `impl Reconcile for MyController` instead of on the struct (already reported
/// by [`target`]): the struct, so that the fallback still implements `Controller` for it and the impl is
/// not also reported for a missing `Controller`. `None` for generic impls and other items.
pub fn reconcile_impl_self(item: &Item) -> Option<(Ident, Type)> {
    let Item::Impl(imp) = item else { return None };
    let (trait_path, _) = imp.trait_.as_ref()?;
    if trait_path.segments.last()?.ident != "Reconcile" || !imp.generics.params.is_empty() {
        return None;
    }
    let Type::Path(path) = &*imp.self_ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if !last.arguments.is_none() {
        return None;
    }
    Some((last.ident.clone(), (*imp.self_ty).clone()))
}

/// Checks every key and the rules between keys.
pub fn validate(args: ControllerArgs, ident: &Ident, errors: &mut Accumulator) -> Model {
    let krate = match &args.krate {
        Some(p) => p.0.to_token_stream(),
        None => quote!(::kubeplex),
    };
    let given = |key: &str| args.given_but_invalid.iter().any(|k| k == key);

    let resource = args.crd.0;
    if resource.is_none() && !given("crd") {
        check::push_missing_crd(errors);
    }
    if let Some(resource) = &resource {
        check::check_kind_is_static(resource, errors);
    }

    let fleet = args.fleet.map(|f| f.0);
    let (contexts_kind, contexts) = match args.contexts {
        Some(list) => {
            check::check_contexts_not_empty(&list, "contexts", errors);
            let kind = check::decide_contexts_kind(&list, fleet.as_ref(), errors);
            if let Some(kind) = &kind {
                check::check_contexts(&list, kind, "contexts", errors);
            }
            (kind, list.items)
        }
        None => {
            if !given("contexts") {
                check::push_missing_contexts(errors);
            }
            (None, Vec::new())
        }
    };

    let namespaces_key = args.namespaces.as_ref().map(|list| list.key);
    let namespaces = args
        .namespaces
        .map(|list| check::check_namespaces(list, errors))
        .unwrap_or_default();

    let name = match &args.name {
        Some(Str(lit)) => {
            check::check_name(lit, errors);
            lit.value()
        }
        None => {
            let name = kebab_case(&ident.to_string());
            check::check_derived_name(&name, ident, errors);
            name
        }
    };

    let label_selector = args.label_selector.map(|Str(lit)| {
        check::check_label_selector(&lit, errors);
        lit
    });
    let field_selector = args.field_selector.map(|Str(lit)| {
        check::check_field_selector(&lit, errors);
        lit
    });
    let concurrency = args
        .concurrency
        .and_then(|int| check::check_concurrency(&int.0, "concurrency", errors));
    let concurrency_per_cluster = args
        .concurrency_per_cluster
        .and_then(|int| check::check_concurrency(&int.0, "concurrency_per_cluster", errors));

    for (key, value) in [
        ("abandon_unreachable_after", &args.abandon_unreachable_after),
        ("abandon_terminating_after", &args.abandon_terminating_after),
    ] {
        if let Some(Str(lit)) = value {
            check::check_abandon_needs_owns(key, lit, args.owns.is_empty(), errors);
        }
    }
    let mut duration = |value: Option<Str>, key: &str| {
        value.and_then(|Str(lit)| check::check_duration(&lit, key, errors))
    };
    let debounce = duration(args.debounce, "debounce");
    let requeue_after = duration(args.requeue_after, "requeue_after");
    let error_requeue = duration(args.error_requeue, "error_requeue");
    let abandon_unreachable_after =
        duration(args.abandon_unreachable_after, "abandon_unreachable_after");
    let abandon_terminating_after =
        duration(args.abandon_terminating_after, "abandon_terminating_after");

    let finalizer = args.finalizer.map(|Str(lit)| {
        check::check_finalizer(&lit, errors);
        lit
    });

    let mut children = Vec::new();
    for owns in args.owns {
        check::check_kind_is_static(&path_type(&owns.kind), errors);
        let members = owns.options.members.0.is_some();
        let contexts = match owns.options.contexts {
            Some(list) => {
                check::check_contexts_not_empty(&list, "owns(.., contexts)", errors);
                if let Some(kind) = &contexts_kind {
                    check::check_contexts(&list, kind, "owns(.., contexts)", errors);
                }
                list.items
            }
            None => {
                check::check_owns_lives_somewhere(&owns.kind, owns.span, members, errors);
                Vec::new()
            }
        };
        let namespaces_key = owns.options.namespaces.as_ref().map(|list| list.key);
        let namespaces = owns
            .options
            .namespaces
            .map(|list| check::check_namespaces(list, errors))
            .unwrap_or_default();
        let keep_on_prune = (owns.options.prune)
            .and_then(|word| check::check_prune(&word, errors))
            .unwrap_or(false);
        let orphan_on_delete = (owns.options.on_delete)
            .and_then(|word| check::check_on_delete(&word, errors))
            .unwrap_or(false);
        let health = (owns.options.health)
            .as_ref()
            .and_then(|rule| check::check_health(&rule.0, errors));
        children.push(ChildModel {
            kind: owns.kind,
            contexts,
            members,
            namespaces,
            namespaces_key,
            keep_on_prune,
            orphan_on_delete,
            health,
            shared: owns.options.shared.0.is_some(),
        });
    }
    check::check_owns_overlap(&children, errors);
    let watches = (args.watches.into_iter())
        .map(|w| watches::validate_watches(w, contexts_kind.as_ref(), errors))
        .collect();

    Model {
        krate,
        self_ty: syn::parse_quote!(#ident),
        resource,
        namespaces_key,
        contexts_kind,
        contexts,
        members: args.members.0.is_some(),
        ignore_readiness_flips: args.ignore_readiness_flips.0.is_some(),
        name,
        namespaces,
        label_selector,
        field_selector,
        concurrency,
        concurrency_per_cluster,
        debounce,
        requeue_after,
        error_requeue,
        abandon_unreachable_after,
        abandon_terminating_after,
        finalizer,
        children,
        watches,
    }
}

/// A path as written, without spaces: `a::b::C`.
pub fn path_string(path: &Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// The fleet of a typed context: `a::Fleet::Variant` → `a::Fleet`.
pub fn fleet_of(path: &Path) -> Option<Path> {
    if path.segments.len() < 2 {
        return None;
    }
    let mut prefix = path.clone();
    prefix.segments.pop();
    prefix.segments.pop_punct();
    Some(prefix)
}

/// kube's `DynamicObject`, whose kind is only known at run time.
pub fn is_dynamic(kind: &Type) -> bool {
    matches!(kind, Type::Path(path) if path.path.segments.last().is_some_and(|s| s.ident == "DynamicObject"))
}

/// A type path as a type.
pub fn path_type(path: &Path) -> Type {
    syn::parse_quote!(#path)
}
