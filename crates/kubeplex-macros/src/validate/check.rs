//! One function per rule of the attribute, each pushing a spanned error that names the fix (the way
//! serde_derive's `check.rs` reads). `push_*` report a missing piece; `check_*` check a given one.

use std::collections::HashSet;

use darling::Error;
use darling::error::Accumulator;
use kubeplex_names::{
    EMPTY_NAMESPACES, MAX_CONTROLLER_NAME, context_name, controller_name, duplicate_namespace,
    finalizer_name, invalid_namespace,
};
use proc_macro2::Span;
use syn::{Ident, LitInt, LitStr, Path, Type};

use super::{ChildModel, ContextsKind, fleet_of, is_dynamic, path_string};
use crate::parse::{ContextItem, ContextList, StrList, Word};
use crate::rules::duration::duration_millis;
use crate::rules::selector::{field_selector, label_selector};

/// `crd` is required.
pub fn push_missing_crd(errors: &mut Accumulator) {
    errors.push(
        Error::custom(
            "#[controller] needs the primary resource: add `crd = MyResource` (a `#[derive(CustomResource)]` type or a k8s-openapi kind)",
        )
        .with_span(&Span::call_site()),
    );
}

/// `contexts` is required.
pub fn push_missing_contexts(errors: &mut Accumulator) {
    errors.push(
        Error::custom(
            "#[controller] needs the contexts the primary resource is watched in: add `contexts = [Fleet::Control]` (a `contexts!` enum) or `contexts = [\"control\"]`",
        )
        .with_span(&Span::call_site()),
    );
}

/// `owns(Kind)` without `contexts` needs `members`: its children must live somewhere.
pub fn check_owns_lives_somewhere(
    kind: &Path,
    span: Span,
    members: bool,
    errors: &mut Accumulator,
) {
    if members {
        return;
    }
    errors.push(
        Error::custom(format!(
            "`owns({})` needs where its children live: add `contexts = [..]`, `members` (every member of the fleet), or both",
            path_string(kind)
        ))
        .with_span(&span),
    );
}

/// kube's `DynamicObject` has no compile-time kind; say so here rather than through its `DynamicType`.
/// (Other types that are not resources are reported by the generated kind check, `expand::kind_checks`.)
pub fn check_kind_is_static(kind: &Type, errors: &mut Accumulator) {
    if is_dynamic(kind) {
        errors.push(
            Error::custom(
                "`DynamicObject` is not supported (yet): kubeplex needs the kind at compile time; use a k8s-openapi type (`k8s_openapi::api::apps::v1::Deployment`) or a `#[derive(CustomResource)]` struct (for a CRD you do not own, declare its schema with `#[derive(CustomResource)]`)",
            )
            .with_span(kind),
        );
    }
}

/// A context list is not empty.
pub fn check_contexts_not_empty(list: &ContextList, key: &str, errors: &mut Accumulator) {
    if list.items.is_empty() {
        let message = match key {
            "contexts" => {
                "`contexts` is empty; name at least one context the primary resource is watched in, e.g. `contexts = [Fleet::Control]`"
            }
            "watches(.., contexts)" => {
                "`contexts` of `watches` is empty; name the contexts the kind is watched in (for the fleet's members only, write `members` and leave `contexts` out)"
            }
            _ => {
                "`contexts` of `owns` is empty; name the contexts its children live in (for children in the fleet's members only, write `members` and leave `contexts` out)"
            }
        };
        errors.push(Error::custom(message).with_span(&list.span));
    }
}

/// Decides from the primary `contexts` how the controller names contexts: typed paths need their fleet,
/// and a `fleet` must be theirs.
pub fn decide_contexts_kind(
    list: &ContextList,
    fleet: Option<&Path>,
    errors: &mut Accumulator,
) -> Option<ContextsKind> {
    match (list.items.first(), fleet) {
        (Some(ContextItem::Typed(path)), _) => match fleet_of(path) {
            Some(prefix) => {
                if let Some(fleet) = fleet
                    && path_string(fleet) != path_string(&prefix)
                {
                    errors.push(
                        Error::custom(format!(
                            "`{}` is not from `fleet = {}`; name contexts of that fleet or remove `fleet`",
                            path_string(path),
                            path_string(fleet)
                        ))
                        .with_span(path),
                    );
                }
                Some(ContextsKind::Typed(prefix))
            }
            None => {
                errors.push(
                    Error::custom(format!(
                        "write the context with its fleet, e.g. `Fleet::{}`, so that kubeplex knows the context type",
                        path_string(path)
                    ))
                    .with_span(path),
                );
                None
            }
        },
        (Some(ContextItem::Named(_)), Some(fleet)) | (None, Some(fleet)) => {
            Some(ContextsKind::NamedInFleet(fleet.clone()))
        }
        (Some(ContextItem::Named(_)), None) | (None, None) => Some(ContextsKind::Named),
    }
}

/// Every context of a list is of the controller's kind (one spelling, one fleet), valid, and listed once.
pub fn check_contexts(
    list: &ContextList,
    kind: &ContextsKind,
    key: &str,
    errors: &mut Accumulator,
) {
    let mut seen = HashSet::new();
    for item in &list.items {
        check_context_kind(item, kind, errors);
        let text = context_text(item);
        if seen.contains(&text) {
            errors.push(
                Error::custom(format!(
                    "context {text} is listed twice in `{key}`; remove one"
                ))
                .with_span(&item.span()),
            );
        }
        seen.insert(text);
    }
}

/// A context as messages show it: `Fleet::A` or `"a"`.
fn context_text(item: &ContextItem) -> String {
    match item {
        ContextItem::Typed(p) => path_string(p),
        ContextItem::Named(s) => format!("{:?}", s.value()),
    }
}

/// One context is spelled like the controller's others, and a string is a valid context name.
fn check_context_kind(item: &ContextItem, kind: &ContextsKind, errors: &mut Accumulator) {
    match (item, kind) {
        (ContextItem::Typed(path), ContextsKind::Typed(fleet)) => match fleet_of(path) {
            Some(prefix) if path_string(&prefix) == path_string(fleet) => {}
            _ => errors.push(
                Error::custom(format!(
                    "`{}` is not a context of `{}`; every context of a controller comes from one fleet: write `{}::..`",
                    path_string(path),
                    path_string(fleet),
                    path_string(fleet)
                ))
                .with_span(path),
            ),
        },
        (ContextItem::Named(lit), ContextsKind::Named | ContextsKind::NamedInFleet(_)) => {
            if let Err(why) = context_name(&lit.value()) {
                errors.push(Error::custom(why).with_span(lit));
            }
        }
        (ContextItem::Named(lit), ContextsKind::Typed(fleet)) => errors.push(
            Error::custom(format!(
                "this context is a string but the controller's contexts are `{}` variants; write `{}::..` here (or use strings everywhere)",
                path_string(fleet),
                path_string(fleet)
            ))
            .with_span(lit),
        ),
        (ContextItem::Typed(path), _) => errors.push(
            Error::custom(
                "this context is a typed path but the controller's contexts are strings; write all contexts one way: \
                 `Fleet::Variant` (checked by rustc) or string literals (add `fleet = Fleet` to check them against it)",
            )
            .with_span(path),
        ),
    }
}

/// Namespaces are DNS-1123 labels, each listed once, and the list is not empty.
pub fn check_namespaces(list: StrList, errors: &mut Accumulator) -> Vec<LitStr> {
    let mut seen = HashSet::new();
    for lit in &list.items {
        let value = lit.value();
        if let Some(why) = invalid_namespace(&value) {
            errors.push(Error::custom(why).with_span(lit));
        } else if seen.contains(&value) {
            errors.push(Error::custom(duplicate_namespace(&value)).with_span(lit));
        }
        seen.insert(value);
    }
    if list.items.is_empty() {
        errors.push(
            Error::custom(format!(
                "{EMPTY_NAMESPACES}; omit `namespaces` to watch every namespace"
            ))
            .with_span(&list.span),
        );
    }
    list.items
}

/// An explicit `name` is a valid controller name (and so a label value).
pub fn check_name(lit: &LitStr, errors: &mut Accumulator) {
    if let Err(why) = controller_name(&lit.value()) {
        errors.push(Error::custom(why).with_span(lit));
    }
}

/// The name derived from the struct fits a label value; otherwise the struct name is the culprit and an
/// explicit `name` the fix.
pub fn check_derived_name(name: &str, ident: &Ident, errors: &mut Accumulator) {
    if name.len() > MAX_CONTROLLER_NAME {
        errors.push(
            Error::custom(format!(
                "the controller name derived from `{ident}` is {:?}, {} characters long; it is a label value on every child and part of the default finalizer `kubeplex.dev/<name>`, so at most {MAX_CONTROLLER_NAME}: add `name = \"..\"` with a shorter name to #[controller]",
                name,
                name.len()
            ))
            .with_span(ident),
        );
    }
}

/// `label_selector` parses as the API server parses it.
pub fn check_label_selector(lit: &LitStr, errors: &mut Accumulator) {
    if let Err(why) = label_selector(&lit.value()) {
        errors.push(Error::custom(format!("invalid `label_selector`: {why}")).with_span(lit));
    }
}

/// `field_selector` parses as the API server parses it.
pub fn check_field_selector(lit: &LitStr, errors: &mut Accumulator) {
    if let Err(why) = field_selector(&lit.value()) {
        errors.push(Error::custom(format!("invalid `field_selector`: {why}")).with_span(lit));
    }
}

/// `concurrency` (or `concurrency_per_cluster`, as `key`) is 1..=65535.
pub fn check_concurrency(int: &LitInt, key: &str, errors: &mut Accumulator) -> Option<u16> {
    let too_large =
        || Error::custom(format!("`{key}` is at most 65535; omit it for unbounded")).with_span(int);
    match int.base10_parse::<u64>() {
        Ok(0) => {
            errors.push(
                Error::custom(format!(
                    "`{key} = 0` would never reconcile; omit `{key}` for unbounded, or give a limit from 1 to 65535",
                ))
                .with_span(int),
            );
            None
        }
        Ok(n) => u16::try_from(n).map_err(|_| errors.push(too_large())).ok(),
        Err(_) => {
            errors.push(too_large());
            None
        }
    }
}

/// A duration key parses, and is not zero.
pub fn check_duration(lit: &LitStr, key: &str, errors: &mut Accumulator) -> Option<u64> {
    match duration_millis(&lit.value()) {
        Ok(ms) => Some(ms),
        Err(why) => {
            errors.push(Error::custom(format!("invalid `{key}`: {why}")).with_span(lit));
            None
        }
    }
}

/// `abandon_unreachable_after` and `abandon_terminating_after` (the `key`) only mean something with
/// children.
pub fn check_abandon_needs_owns(key: &str, lit: &LitStr, no_owns: bool, errors: &mut Accumulator) {
    if no_owns {
        errors.push(
            Error::custom(format!(
                "`{key}` only applies to children in other clusters: add `owns(..)` or remove it"
            ))
            .with_span(lit),
        );
    }
}

/// `finalizer` is domain-qualified.
pub fn check_finalizer(lit: &LitStr, errors: &mut Accumulator) {
    if let Err(why) = finalizer_name(&lit.value()) {
        errors.push(Error::custom(format!("invalid `finalizer`: {why}")).with_span(lit));
    }
}

/// One kind is owned once per context, and once in the members: the runtime looks a child up by its kind,
/// so a second `owns` of the same kind in a shared context (or a second `members`) would never be
/// consulted. Kinds are compared as written (the same kind spelled by two different paths is not caught).
pub fn check_owns_overlap(children: &[ChildModel], errors: &mut Accumulator) {
    for (i, later) in children.iter().enumerate() {
        let kind = path_string(&later.kind);
        let Some(earlier) = children[..i].iter().find(|c| path_string(&c.kind) == kind) else {
            continue;
        };
        let earlier_contexts: Vec<String> = earlier.contexts.iter().map(context_text).collect();
        let mut shared: Vec<String> = later
            .contexts
            .iter()
            .map(context_text)
            .filter(|c| earlier_contexts.contains(c))
            .map(|c| format!("`{c}`"))
            .collect();
        let contexts = match shared.len() {
            0 => None,
            1 => Some("one context"),
            _ => Some("the same contexts"),
        };
        let members = (earlier.members && later.members).then_some("every member of the fleet");
        let place = match (contexts, members) {
            (None, None) => continue,
            (Some(one), None) | (None, Some(one)) => one.to_owned(),
            (Some(contexts), Some(members)) => format!("{contexts} and in {members}"),
        };
        if members.is_some() {
            shared.push("`members`".to_owned());
        }
        let merged = if members.is_some() {
            format!("`owns({kind}, members, contexts = [..], namespaces = [..])`")
        } else {
            format!("`owns({kind}, contexts = [..], namespaces = [..])`")
        };
        errors.push(
            Error::custom(format!(
                "`{kind}` is owned twice in {place}: this `owns({kind}, ..)` and an earlier `owns({kind}, ..)` both list {}; \
                 merge them into one {merged}",
                shared.join(", ")
            ))
            .with_span(&later.kind),
        );
    }
}

/// `owns(.., prune = ..)` is `keep` or `delete`; `Some(true)` for keep.
pub fn check_prune(word: &Word, errors: &mut Accumulator) -> Option<bool> {
    let what = "a child no longer declared is unlinked and left in place";
    let hint = "`orphan` is what `on_delete` takes: `on_delete = orphan`";
    check_policy(word, ("prune", "keep", what), ("orphan", hint), errors)
}

/// `owns(.., on_delete = ..)` is `orphan` or `delete`; `Some(true)` for orphan.
pub fn check_on_delete(word: &Word, errors: &mut Accumulator) -> Option<bool> {
    let what = "when the parent is deleted, the child is unlinked and left in place";
    let hint = "`keep` is what `prune` takes: `prune = keep`";
    check_policy(word, ("on_delete", "orphan", what), ("keep", hint), errors)
}

/// `owns(.., health = ..)` is the path of the rule function (`fn(&Projection) -> Assessment`), not a string
/// or a call: whether the function fits is the compiler's to say, at the path.
pub fn check_health(rule: &syn::Expr, errors: &mut Accumulator) -> Option<syn::Path> {
    let problem = match rule {
        syn::Expr::Path(path) if path.qself.is_none() => return Some(path.path.clone()),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => format!(
            "`health` takes the rule function's path, not a string: `health = {}`",
            text.value()
        ),
        syn::Expr::Call(_) => {
            "`health` takes the rule function itself, not a call: `health = my_rules::web` \
             (a `fn(&kubeplex::health::Projection) -> kubeplex::health::Assessment`)"
                .to_owned()
        }
        _ => "`health` takes the path of a rule function: `health = my_rules::web` \
              (a `fn(&kubeplex::health::Projection) -> kubeplex::health::Assessment`)"
            .to_owned(),
    };
    errors.push(Error::custom(problem).with_span(rule));
    None
}

/// A policy key (`key`) takes `spares` (which does `what`) or `delete`; `other` is the word of the other
/// policy key, with a hint to use it there.
fn check_policy(
    Word(word): &Word,
    (key, spares, what): (&str, &str, &str),
    (other, hint): (&str, &str),
    errors: &mut Accumulator,
) -> Option<bool> {
    match word.to_string().as_str() {
        "delete" => Some(false),
        value if value == spares => Some(true),
        value => {
            let mut message = format!(
                "`{value}` is not a policy of `{key}`: write `{key} = {spares}` ({what}) or `{key} = delete` (the default)"
            );
            if value == other {
                message = format!("{message}; {hint}");
            }
            errors.push(Error::custom(message).with_span(word));
            None
        }
    }
}
