//! What `watches(Kind, ..)` means, checked: where the kind is watched, its namespaces and selectors, and
//! that its map function is named by its path.

use darling::Error;
use darling::error::Accumulator;
use proc_macro2::Span;
use syn::{LitStr, Path};

use super::check;
use super::{ContextsKind, path_string};
use crate::parse::{ContextItem, Str, Watches};

/// A validated `watches(..)`.
#[derive(Debug)]
pub struct WatchModel {
    /// The watched kind.
    pub kind: Path,
    /// The contexts it is watched in (may be empty with `members`).
    pub contexts: Vec<ContextItem>,
    /// `members`: it is also watched in every member of the fleet.
    pub members: bool,
    /// Its namespaces (empty: all).
    pub namespaces: Vec<LitStr>,
    /// The key `namespaces` of this `watches`, if given.
    pub namespaces_key: Option<Span>,
    /// `label_selector`.
    pub label_selector: Option<LitStr>,
    /// `field_selector`.
    pub field_selector: Option<LitStr>,
    /// `map = path`: the function from a changed object to the parents to reconcile.
    pub map: Option<Path>,
}

/// Checks one `watches(..)`; `contexts_kind` is how the controller names its contexts, once known.
pub fn validate_watches(
    watches: Watches,
    contexts_kind: Option<&ContextsKind>,
    errors: &mut Accumulator,
) -> WatchModel {
    check::check_kind_is_static(&super::path_type(&watches.kind), errors);
    let options = watches.options;
    let members = options.members.0.is_some();
    let contexts = match options.contexts {
        Some(list) => {
            check::check_contexts_not_empty(&list, "watches(.., contexts)", errors);
            if let Some(kind) = contexts_kind {
                check::check_contexts(&list, kind, "watches(.., contexts)", errors);
            }
            list.items
        }
        None => {
            if !members {
                errors.push(
                    Error::custom(format!(
                        "`watches({})` needs where the kind is watched: add `contexts = [..]`, `members` (every member of the fleet), or both",
                        path_string(&watches.kind)
                    ))
                    .with_span(&watches.span),
                );
            }
            Vec::new()
        }
    };
    let namespaces_key = options.namespaces.as_ref().map(|list| list.key);
    let namespaces = (options.namespaces)
        .map(|list| check::check_namespaces(list, errors))
        .unwrap_or_default();
    let label_selector = options.label_selector.map(|Str(lit)| {
        check::check_label_selector(&lit, errors);
        lit
    });
    let field_selector = options.field_selector.map(|Str(lit)| {
        check::check_field_selector(&lit, errors);
        lit
    });
    let map = options.map.and_then(|map| check_map(&map.0, errors));
    WatchModel {
        kind: watches.kind,
        contexts,
        members,
        namespaces,
        namespaces_key,
        label_selector,
        field_selector,
        map,
    }
}

/// The signature a map function has, as errors name it.
const MAP_SIGNATURE: &str =
    "a `fn(&Kind, &kubeplex::Cluster<Context>, bool) -> Vec<ObjectRef<Primary>>`";

/// `map` names a function by its path.
fn check_map(map: &syn::Expr, errors: &mut Accumulator) -> Option<Path> {
    let problem = match map {
        syn::Expr::Path(path) if path.qself.is_none() => return Some(path.path.clone()),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => format!(
            "`map` takes the map function's path, not a string: `map = {}`",
            text.value()
        ),
        syn::Expr::Call(_) => format!(
            "`map` takes the map function itself, not a call: `map = placements_of_node` ({MAP_SIGNATURE})"
        ),
        syn::Expr::Closure(_) => format!(
            "`map` takes the path of a function, not a closure: write it as a `fn` and name it, `map = placements_of_node` ({MAP_SIGNATURE})"
        ),
        _ => format!(
            "`map` takes the path of a map function: `map = placements_of_node` ({MAP_SIGNATURE})"
        ),
    };
    errors.push(Error::custom(problem).with_span(map));
    None
}
