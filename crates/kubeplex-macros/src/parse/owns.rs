//! The inside of `owns(Kind, ..)`: the child kind, then where children of that kind live.

use darling::{FromMeta, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Meta, Path};

use super::keys::kind_and_options;
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
    /// `shared` (a flag): several parents may declare the same child of this kind.
    #[darling(default)]
    pub shared: Flag,
}

/// `owns(Kind, members, contexts = [..], namespaces = [..], prune = keep, on_delete = orphan, health = rule,
/// shared)`.
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
        let (kind, rest, mut errors) =
            kind_and_options(meta, "owns", "the child kind", "Deployment")?;
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
