//! The key of one item of the attribute, as written: for repeated-key checks and errors about the key;
//! and the kind and options of a `key(Kind, ..)` item (`owns`, `watches`).

use darling::ast::NestedMeta;
use darling::util::path_to_string;
use darling::{Error, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Meta, Path};

/// The key of an item, as written.
pub(super) fn key_of(item: &NestedMeta) -> String {
    match item {
        NestedMeta::Meta(meta) => path_to_string(meta.path()),
        NestedMeta::NameValueInvalidExpr(nv) => path_to_string(&nv.path),
        NestedMeta::Lit(_) => String::new(),
    }
}

/// The key's tokens, for errors about the key itself.
pub(super) fn path_of(item: &NestedMeta) -> Span {
    match item {
        NestedMeta::Meta(meta) => meta.path().span(),
        NestedMeta::NameValueInvalidExpr(nv) => nv.path.span(),
        NestedMeta::Lit(lit) => lit.span(),
    }
}

/// The kind a `key(Kind, ..)` item starts with, and its options, each key once: a key given again is
/// reported (at the second key, with the other mistakes) and dropped. `what` says what the kind is.
pub(super) fn kind_and_options(
    meta: &Meta,
    key: &str,
    what: &str,
    example: &str,
) -> Result<(Path, Vec<NestedMeta>, darling::error::Accumulator)> {
    let list = match meta {
        Meta::List(list) => list,
        _ => {
            return Err(Error::custom(format!(
                "`{key}` takes {what} and where it lives: `{key}({example}, contexts = [..])`"
            ))
            .with_span(meta));
        }
    };
    let items = NestedMeta::parse_meta_list(list.tokens.clone())?;
    let (kind, rest) = match items.split_first() {
        Some((NestedMeta::Meta(Meta::Path(path)), rest)) => (path.clone(), rest),
        Some((first, _)) => {
            return Err(Error::custom(format!(
                "`{key}` starts with {what}, a type path: `{key}({example}, contexts = [..])`"
            ))
            .with_span(first));
        }
        None => {
            return Err(Error::custom(format!(
                "`{key}()` is empty; name {what} and its contexts: `{key}({example}, contexts = [..])`"
            ))
            .with_span(meta));
        }
    };
    let mut errors = Error::accumulator();
    let mut kept: Vec<NestedMeta> = Vec::new();
    for item in rest {
        let given = key_of(item);
        if !given.is_empty() && kept.iter().any(|k| key_of(k) == given) {
            errors.push(
                Error::custom(format!(
                    "`{given}` is given more than once in `{key}({}, ..)`; keep one",
                    path_to_string(&kind)
                ))
                .with_span(&path_of(item)),
            );
        } else {
            kept.push(item.clone());
        }
    }
    Ok((kind, kept, errors))
}
