//! The inside of `owns(Kind, ..)`: the child kind, then where children of that kind live.

use darling::ast::NestedMeta;
use darling::util::path_to_string;
use darling::{Error, FromMeta, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Meta, Path};

use super::keys::{key_of, path_of};
use super::values::{ContextList, Flag, RawExpr, StrList, Word};

/// The inside of `owns(Kind, ...)`, after the kind.
#[derive(Debug, Default, FromMeta)]
pub struct OwnsOptions {
    /// `members` (a flag): children of this kind also live in every member of the fleet (clusters
    /// discovered at run time). At least one of `members` and `contexts` is required.
    #[darling(default)]
    pub members: Flag,
    /// `contexts = [..]`: the contexts children of this kind live in; same kind of context as the primary's.
    pub contexts: Option<ContextList>,
    /// `namespaces = [..]` (default: every namespace): the namespaces children of this kind live in.
    pub namespaces: Option<StrList>,
    /// `prune = keep` (default: `delete`): a child of this kind no longer declared is unlinked and left in
    /// place instead of deleted.
    pub prune: Option<Word>,
    /// `on_delete = orphan` (default: `delete`): when the parent is deleted, a child of this kind is
    /// unlinked and left in place instead of deleted.
    pub on_delete: Option<Word>,
    /// `health = path::to::rule` (default: the kind's built-in rule): the function that judges a child's
    /// health from its projection.
    pub health: Option<RawExpr>,
}

/// `owns(Kind, members, contexts = [..], namespaces = [..], prune = keep, on_delete = orphan, health = rule)`.
#[derive(Debug)]
pub struct Owns {
    /// The whole `owns(...)`, for errors about it as a whole.
    pub span: Span,
    /// The child kind.
    pub kind: Path,
    /// The options after the kind.
    pub options: OwnsOptions,
}

impl FromMeta for Owns {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let list = match meta {
            Meta::List(list) => list,
            _ => {
                return Err(Error::custom(
                    "`owns` takes the child kind and where it lives: `owns(Deployment, contexts = [..])`",
                )
                .with_span(meta));
            }
        };
        let items = NestedMeta::parse_meta_list(list.tokens.clone())?;
        let (kind, rest) = match items.split_first() {
            Some((NestedMeta::Meta(Meta::Path(path)), rest)) => (path.clone(), rest),
            Some((first, _)) => {
                return Err(Error::custom(
                    "`owns` starts with the child kind, a type path: `owns(Deployment, contexts = [..])`",
                )
                .with_span(first));
            }
            None => {
                return Err(Error::custom(
                    "`owns()` is empty; name the child kind and its contexts: `owns(Deployment, contexts = [..])`",
                )
                .with_span(meta));
            }
        };
        // A repeated key is reported with the option's other mistakes, not instead of them.
        let mut errors = Error::accumulator();
        let rest = without_repeated_keys(rest, &kind, &mut errors);
        let options = errors
            .handle(OwnsOptions::from_list(&rest))
            .unwrap_or_default();
        errors.finish_with(Owns {
            span: meta.span(),
            kind,
            options,
        })
    }
}

/// The options of one `owns`, each key once: a key given again is reported as at the top level (at the
/// second key), instead of darling's "Duplicate field".
fn without_repeated_keys(
    items: &[NestedMeta],
    kind: &Path,
    errors: &mut darling::error::Accumulator,
) -> Vec<NestedMeta> {
    let mut kept: Vec<NestedMeta> = Vec::new();
    for item in items {
        let key = key_of(item);
        if !key.is_empty() && kept.iter().any(|k| key_of(k) == key) {
            errors.push(
                Error::custom(format!(
                    "`{key}` is given more than once in `owns({}, ..)`; keep one",
                    path_to_string(kind)
                ))
                .with_span(&path_of(item)),
            );
        } else {
            kept.push(item.clone());
        }
    }
    kept
}
