//! The key of one item of the attribute, as written: for repeated-key checks and errors about the key.

use darling::ast::NestedMeta;
use darling::util::path_to_string;
use proc_macro2::Span;
use syn::spanned::Spanned;

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
