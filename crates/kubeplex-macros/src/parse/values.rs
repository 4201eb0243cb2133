//! The values of `#[controller(...)]`'s keys: a type, a path, a list of contexts or strings, a flag, a
//! string or an integer literal, each parsed for its shape only, with an error naming the key and the form
//! it takes.

use darling::util::path_to_string;
use darling::{Error, FromMeta, Result};
use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, LitInt, LitStr, Meta, Path, Type};

/// The right-hand side of `key = value`, or an error naming the key and the expected form.
fn value_of<'a>(meta: &'a Meta, form: &str) -> Result<&'a Expr> {
    match meta {
        Meta::NameValue(nv) => Ok(ungroup(&nv.value)),
        _ => {
            let key = path_to_string(meta.path());
            Err(Error::custom(format!("write `{key} = {form}`")).with_span(meta))
        }
    }
}

/// Looks through the invisible groups a `macro_rules!` leaves around `$x:expr`.
fn ungroup(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(group) => ungroup(&group.expr),
        _ => expr,
    }
}

/// `crd = Type`; `None` when the key is absent. (Not an `Option<TypeArg>`: darling's `Option` does not
/// forward `from_invalid_expr`, which `crd = Wrapper<Kind>` needs.)
#[derive(Debug, Default)]
pub struct TypeArg(pub Option<Type>);

impl FromMeta for TypeArg {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "Type")?;
        if let Expr::Lit(lit) = expr {
            return Err(
                Error::custom("write the type itself, not a string: `crd = MyResource`")
                    .with_span(lit),
            );
        }
        syn::parse2::<Type>(expr.to_token_stream())
            .map(|t| TypeArg(Some(t)))
            .map_err(|_| Error::custom("expected a type: `crd = MyResource`").with_span(expr))
    }

    fn from_invalid_expr(nv: &darling::ast::MetaNameValueInvalidExpr) -> Result<Self> {
        // `crd = Wrapper<Kind>` is a type but not an expression.
        syn::parse2::<Type>(nv.value.clone())
            .map(|t| TypeArg(Some(t)))
            .map_err(|_| Error::custom("expected a type: `crd = MyResource`").with_span(&nv.value))
    }
}

/// `fleet = Path` and `crate = path`.
#[derive(Debug)]
pub struct PathArg(pub Path);

impl FromMeta for PathArg {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "path")?;
        match expr {
            Expr::Path(p) if p.qself.is_none() => Ok(PathArg(p.path.clone())),
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => s.parse::<Path>().map(PathArg).map_err(|_| {
                Error::custom("expected a path such as `my_kubeplex` or `crate::Fleet`")
                    .with_span(s)
            }),
            _ => Err(
                Error::custom("expected a path such as `my_kubeplex` or `crate::Fleet`")
                    .with_span(expr),
            ),
        }
    }
}

/// One entry of `contexts = [..]`.
#[derive(Debug, Clone)]
pub enum ContextItem {
    /// `Fleet::Variant`: checked by rustc.
    Typed(Path),
    /// `"name"`: checked by kubeplex.
    Named(LitStr),
}

impl ContextItem {
    /// The tokens of the entry, for spans.
    pub fn span(&self) -> Span {
        match self {
            ContextItem::Typed(p) => p.span(),
            ContextItem::Named(s) => s.span(),
        }
    }
}

/// `contexts = [..]`.
#[derive(Debug, Clone)]
pub struct ContextList {
    /// The `[..]`, for errors about the list as a whole.
    pub span: Span,
    /// The entries.
    pub items: Vec<ContextItem>,
}

impl FromMeta for ContextList {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "[Fleet::Context, ..]")?;
        let array = match expr {
            Expr::Array(array) => array,
            _ => {
                return Err(Error::custom(
                    "expected a list of contexts: `contexts = [Fleet::Control]` or `contexts = [\"control\"]`",
                )
                .with_span(expr));
            }
        };
        let mut errors = Error::accumulator();
        let mut items = Vec::new();
        for elem in &array.elems {
            match ungroup(elem) {
                Expr::Path(p) if p.qself.is_none() => items.push(ContextItem::Typed(p.path.clone())),
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => items.push(ContextItem::Named(s.clone())),
                other => errors.push(
                    Error::custom(
                        "a context is a `contexts!` variant such as `Fleet::Control`, or a string literal such as `\"control\"`",
                    )
                    .with_span(other),
                ),
            }
        }
        errors.finish_with(ContextList {
            span: array.span(),
            items,
        })
    }
}

/// `namespaces = ["a", ..]`.
#[derive(Debug, Clone)]
pub struct StrList {
    /// The key (`namespaces`), for errors about what the list applies to.
    pub key: Span,
    /// The `[..]`.
    pub span: Span,
    /// The strings.
    pub items: Vec<LitStr>,
}

impl FromMeta for StrList {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "[\"..\", ..]")?;
        let array = match expr {
            Expr::Array(array) => array,
            _ => {
                let key = path_to_string(meta.path());
                return Err(Error::custom(format!(
                    "expected a list of string literals: `{key} = [\"default\"]`"
                ))
                .with_span(expr));
            }
        };
        let mut errors = Error::accumulator();
        let mut items = Vec::new();
        for elem in &array.elems {
            match ungroup(elem) {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => items.push(s.clone()),
                other => errors.push(
                    Error::custom("expected a string literal such as `\"default\"`")
                        .with_span(other),
                ),
            }
        }
        errors.finish_with(StrList {
            key: meta.path().span(),
            span: array.span(),
            items,
        })
    }
}

/// A key given alone, without a value: `members`; `None` when the key is absent. (Not an `Option<Flag>`:
/// darling's `Option` does not forward `from_invalid_expr`, which `members = Not<An, Expr>` needs.)
#[derive(Debug, Default, Clone, Copy)]
pub struct Flag(pub Option<Span>);

impl FromMeta for Flag {
    fn from_meta(meta: &Meta) -> Result<Self> {
        match meta {
            Meta::Path(path) => Ok(Flag(Some(path.span()))),
            _ => Err(flag_with_value(meta.path()).with_span(meta)),
        }
    }

    fn from_invalid_expr(nv: &darling::ast::MetaNameValueInvalidExpr) -> Result<Self> {
        Err(flag_with_value(&nv.path).with_span(&nv.path))
    }
}

/// A flag was given a value (`members = true`).
fn flag_with_value(path: &Path) -> Error {
    let key = path_to_string(path);
    Error::custom(format!(
        "`{key}` is a flag and takes no value: write `{key}` alone (or leave it out)"
    ))
}

/// `key = "string"`.
#[derive(Debug, Clone)]
pub struct Str(pub LitStr);

impl FromMeta for Str {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "\"..\"")?;
        match expr {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Ok(Str(s.clone())),
            _ => {
                let key = path_to_string(meta.path());
                Err(
                    Error::custom(format!("`{key}` takes a string literal: `{key} = \"..\"`"))
                        .with_span(expr),
                )
            }
        }
    }
}

/// `key = word`: one bare identifier, such as `prune = keep`; which words a key takes is checked in
/// `validate/`.
#[derive(Debug, Clone)]
pub struct Word(pub syn::Ident);

impl FromMeta for Word {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let key = path_to_string(meta.path());
        let expr = value_of(meta, "word")?;
        match expr {
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                Ok(Word(p.path.get_ident().cloned().expect("checked")))
            }
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Err(Error::custom(format!(
                "`{key}` takes a word, not a string: write `{key} = {}` without the quotes",
                s.value()
            ))
            .with_span(s)),
            _ => Err(Error::custom(format!(
                "`{key}` takes a single word, such as `{key} = delete`"
            ))
            .with_span(expr)),
        }
    }
}

/// `key = expression`, kept as written (a string stays a string literal): what it must be is checked in
/// `validate/`, such as `health = path::to::rule`.
#[derive(Debug, Clone)]
pub struct RawExpr(pub Expr);

impl FromMeta for RawExpr {
    fn from_meta(meta: &Meta) -> Result<Self> {
        value_of(meta, "path::to::rule").map(|expr| RawExpr(expr.clone()))
    }
}

/// `key = 123`.
#[derive(Debug, Clone)]
pub struct Int(pub LitInt);

impl FromMeta for Int {
    fn from_meta(meta: &Meta) -> Result<Self> {
        let expr = value_of(meta, "8")?;
        match expr {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => Ok(Int(i.clone())),
            _ => {
                let key = path_to_string(meta.path());
                Err(
                    Error::custom(format!("`{key}` takes an integer literal: `{key} = 8`"))
                        .with_span(expr),
                )
            }
        }
    }
}
