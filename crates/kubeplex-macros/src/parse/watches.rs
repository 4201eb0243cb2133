//! The inside of `watches(Kind, ..)`: a kind the controller watches without reconciling or owning it,
//! where, and the function that maps its changes to parents.

use darling::{FromMeta, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Meta, Path};

use super::keys::kind_and_options;
use super::values::{ContextList, Flag, RawExpr, Str, StrList};

/// The inside of `watches(Kind, ...)`, after the kind.
#[derive(Debug, Default, FromMeta)]
pub struct WatchesOptions {
    /// `members` (a flag): the kind is also watched in every member of the fleet. At least one of
    /// `members` and `contexts` is required.
    #[darling(default)]
    pub members: Flag,
    /// `contexts = [..]`: the contexts the kind is watched in; same kind of context as the primary's.
    pub contexts: Option<ContextList>,
    /// `namespaces = [..]` (default: every namespace): the namespaces the kind is watched in.
    pub namespaces: Option<StrList>,
    /// `label_selector = ".."` (optional): watch only objects whose labels match.
    pub label_selector: Option<Str>,
    /// `field_selector = ".."` (optional): watch only objects whose fields match.
    pub field_selector: Option<Str>,
    /// `map = path::to::fn` (default: every parent): the function from a changed object to the parents to
    /// reconcile.
    pub map: Option<RawExpr>,
}

/// `watches(Kind, members, contexts = [..], namespaces = [..], label_selector = "..", map = path)`.
#[derive(Debug)]
pub struct Watches {
    /// The whole `watches(...)`, for errors about it as a whole.
    pub span: Span,
    /// The watched kind.
    pub kind: Path,
    /// The options after the kind.
    pub options: WatchesOptions,
}

impl FromMeta for Watches {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let (kind, rest, mut errors) =
            kind_and_options(meta, "watches", "the watched kind", "Node")?;
        let options = errors
            .handle(WatchesOptions::from_list(&rest))
            .unwrap_or_default();
        errors.finish_with(Watches {
            span: meta.span(),
            kind,
            options,
        })
    }
}
