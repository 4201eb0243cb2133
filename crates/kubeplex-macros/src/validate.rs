//! What the values of `#[controller(...)]` mean, checked: every error is collected (never just the first),
//! spanned at the offending token, and says how to fix it. The result is a [`Model`] for `expand.rs`.

use darling::Error;
use darling::error::Accumulator;
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{Ident, Item, ItemStruct, LitStr, Path, Type};

use crate::parse::{ContextItem, ContextList, ControllerArgs, Str, StrList};

/// The longest context name (a DNS subdomain's limit; kubeconfig names are rarely longer).
pub const MAX_CONTEXT_NAME: usize = 253;

/// A validated `#[controller]`, ready to expand.
#[derive(Debug)]
pub struct Model {
    /// The path of the kubeplex crate.
    pub krate: TokenStream,
    /// The struct the attribute is on.
    pub ident: Ident,
    /// The primary resource type.
    pub resource: Type,
    /// How contexts are named.
    pub contexts_kind: ContextsKind,
    /// The primary resource's contexts.
    pub contexts: Vec<ContextItem>,
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
    /// `debounce`, in milliseconds.
    pub debounce: Option<u64>,
    /// `requeue_after`, in milliseconds.
    pub requeue_after: Option<u64>,
    /// `error_requeue`, in milliseconds.
    pub error_requeue: Option<u64>,
    /// `abandon_unreachable_after`, in milliseconds.
    pub abandon_unreachable_after: Option<u64>,
    /// `finalizer`.
    pub finalizer: Option<LitStr>,
    /// The `owns(..)` entries.
    pub children: Vec<ChildModel>,
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
    /// Where children live.
    pub contexts: Vec<ContextItem>,
    /// Their namespaces (empty: all).
    pub namespaces: Vec<LitStr>,
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

/// Checks every key and the rules between keys.
pub fn validate(args: ControllerArgs, ident: &Ident, errors: &mut Accumulator) -> Option<Model> {
    let krate = match &args.krate {
        Some(p) => p.0.to_token_stream(),
        None => quote!(::kubeplex),
    };

    let given = |key: &str| args.given_but_invalid.iter().any(|k| k == key);
    let resource = args.crd.0;
    if resource.is_none() && !given("crd") {
        errors.push(
            Error::custom(
                "#[controller] needs the primary resource: add `crd = MyResource` (a `#[derive(CustomResource)]` type or a k8s-openapi kind)",
            )
            .with_span(&Span::call_site()),
        );
    }

    let fleet = args.fleet.map(|f| f.0);
    let mut contexts_kind = None;
    let contexts = match args.contexts {
        Some(list) => {
            if list.items.is_empty() {
                errors.push(
                    Error::custom(
                        "`contexts` is empty; name at least one context the primary resource is watched in, e.g. `contexts = [Fleet::Control]`",
                    )
                    .with_span(&list.span),
                );
            }
            contexts_kind = decide_kind(&list, fleet.as_ref(), errors);
            if let Some(kind) = &contexts_kind {
                check_contexts(&list, kind, "contexts", errors);
            }
            list.items
        }
        None if given("contexts") => Vec::new(),
        None => {
            errors.push(
                Error::custom(
                    "#[controller] needs the contexts the primary resource is watched in: add `contexts = [Fleet::Control]` (a `contexts!` enum) or `contexts = [\"control\"]`",
                )
                .with_span(&Span::call_site()),
            );
            Vec::new()
        }
    };

    let namespaces = args
        .namespaces
        .map(|list| check_namespaces(list, errors))
        .unwrap_or_default();

    let name = match &args.name {
        Some(Str(lit)) => {
            if let Err(why) = controller_name(&lit.value()) {
                errors.push(Error::custom(why).with_span(lit));
            }
            lit.value()
        }
        None => kebab_case(&ident.to_string()),
    };

    let label_selector = args.label_selector.map(|Str(lit)| {
        if let Err(why) = label_selector(&lit.value()) {
            errors.push(Error::custom(format!("invalid `label_selector`: {why}")).with_span(&lit));
        }
        lit
    });
    let field_selector = args.field_selector.map(|Str(lit)| {
        if let Err(why) = field_selector(&lit.value()) {
            errors.push(Error::custom(format!("invalid `field_selector`: {why}")).with_span(&lit));
        }
        lit
    });

    let concurrency = args.concurrency.and_then(|int| match int.0.base10_parse::<u64>() {
        Ok(0) => {
            errors.push(
                Error::custom(
                    "`concurrency = 0` would never reconcile; omit `concurrency` for unbounded, or give a limit from 1 to 65535",
                )
                .with_span(&int.0),
            );
            None
        }
        Ok(n) if n <= u64::from(u16::MAX) => Some(n as u16),
        _ => {
            errors.push(
                Error::custom("`concurrency` is at most 65535; omit it for unbounded").with_span(&int.0),
            );
            None
        }
    });

    if let (Some(Str(lit)), true) = (&args.abandon_unreachable_after, args.owns.is_empty()) {
        errors.push(
            Error::custom(
                "`abandon_unreachable_after` only applies to children in other clusters: add `owns(..)` or remove it",
            )
            .with_span(lit),
        );
    }
    let mut duration = |value: Option<Str>, key: &str| {
        value.and_then(|Str(lit)| match duration_millis(&lit.value()) {
            Ok(ms) => Some(ms),
            Err(why) => {
                errors.push(Error::custom(format!("invalid `{key}`: {why}")).with_span(&lit));
                None
            }
        })
    };
    let debounce = duration(args.debounce, "debounce");
    let requeue_after = duration(args.requeue_after, "requeue_after");
    let error_requeue = duration(args.error_requeue, "error_requeue");
    let abandon_unreachable_after =
        duration(args.abandon_unreachable_after, "abandon_unreachable_after");

    let finalizer = args.finalizer.map(|Str(lit)| {
        if let Err(why) = finalizer_name(&lit.value()) {
            errors.push(Error::custom(format!("invalid `finalizer`: {why}")).with_span(&lit));
        }
        lit
    });

    let mut children = Vec::new();
    for owns in args.owns {
        let contexts = match owns.options.contexts {
            Some(list) => {
                if list.items.is_empty() {
                    errors.push(
                        Error::custom(
                            "`contexts` of `owns` is empty; name the contexts its children live in",
                        )
                        .with_span(&list.span),
                    );
                }
                if let Some(kind) = &contexts_kind {
                    check_contexts(&list, kind, "owns(.., contexts)", errors);
                }
                list.items
            }
            None => {
                errors.push(
                    Error::custom(format!(
                        "`owns({})` needs the contexts its children live in: add `contexts = [..]`",
                        path_string(&owns.kind)
                    ))
                    .with_span(&owns.span),
                );
                Vec::new()
            }
        };
        let namespaces = owns
            .options
            .namespaces
            .map(|list| check_namespaces(list, errors))
            .unwrap_or_default();
        children.push(ChildModel {
            kind: owns.kind,
            contexts,
            namespaces,
        });
    }

    Some(Model {
        krate,
        ident: ident.clone(),
        resource: resource?,
        contexts_kind: contexts_kind?,
        contexts,
        name,
        namespaces,
        label_selector,
        field_selector,
        concurrency,
        debounce,
        requeue_after,
        error_requeue,
        abandon_unreachable_after,
        finalizer,
        children,
    })
}

/// Decides from the primary `contexts` how the controller names contexts.
fn decide_kind(
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
        (Some(ContextItem::Named(_)), Some(fleet)) => {
            Some(ContextsKind::NamedInFleet(fleet.clone()))
        }
        (Some(ContextItem::Named(_)), None) | (None, None) => Some(ContextsKind::Named),
        (None, Some(fleet)) => Some(ContextsKind::NamedInFleet(fleet.clone())),
    }
}

/// The fleet of a typed context: `a::Fleet::Variant` → `a::Fleet`.
fn fleet_of(path: &Path) -> Option<Path> {
    if path.segments.len() < 2 {
        return None;
    }
    let mut prefix = path.clone();
    prefix.segments.pop();
    prefix.segments.pop_punct();
    Some(prefix)
}

/// Checks a context list against the controller's kind of contexts: one kind, one fleet, valid and
/// unique names.
fn check_contexts(list: &ContextList, kind: &ContextsKind, key: &str, errors: &mut Accumulator) {
    let mut seen: Vec<String> = Vec::new();
    for item in &list.items {
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
        let text = match item {
            ContextItem::Typed(p) => path_string(p),
            ContextItem::Named(s) => format!("{:?}", s.value()),
        };
        if seen.contains(&text) {
            errors.push(
                Error::custom(format!(
                    "context {text} is listed twice in `{key}`; remove one"
                ))
                .with_span(&item.span()),
            );
        } else {
            seen.push(text);
        }
    }
}

/// Checks namespaces: DNS-1123 labels, each once.
fn check_namespaces(list: StrList, errors: &mut Accumulator) -> Vec<LitStr> {
    let mut seen = Vec::new();
    for lit in &list.items {
        let value = lit.value();
        if let Err(why) = dns_label(&value) {
            errors
                .push(Error::custom(format!("invalid namespace {value:?}: {why}")).with_span(lit));
        } else if seen.contains(&value) {
            errors.push(
                Error::custom(format!("namespace {value:?} is listed twice; remove one"))
                    .with_span(lit),
            );
        }
        seen.push(value);
    }
    if list.items.is_empty() {
        errors.push(
            Error::custom(
                "`namespaces = []` watches nothing; omit `namespaces` to watch every namespace",
            )
            .with_span(&list.span),
        );
    }
    list.items
}

/// A path as written, without spaces: `a::b::C`.
pub fn path_string(path: &Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// `AppDeployer` → `app-deployer`, `HTTPProxy` → `http-proxy`, `My_Thing2` → `my-thing2`.
pub fn kebab_case(ident: &str) -> String {
    let ident = ident.strip_prefix("r#").unwrap_or(ident);
    let chars: Vec<char> = ident.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' {
            if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            continue;
        }
        if c.is_uppercase() && i > 0 && !out.ends_with('-') {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('-');
            }
        }
        out.extend(c.to_lowercase());
    }
    out.trim_end_matches('-').to_string()
}

/// A controller name: it becomes the field manager (at most 128 bytes) and a metrics label.
pub fn controller_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "the controller name is empty; omit `name` to use the struct's name in kebab-case"
                .into(),
        );
    }
    if name.len() > 128 {
        return Err(
            "the controller name is longer than 128 bytes (the field manager's limit); shorten it"
                .into(),
        );
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.chars().all(ok_char) || !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err(format!(
            "controller name {name:?} must be lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, e.g. \"app-deployer\""
        ));
    }
    Ok(())
}

/// A kubeconfig context name: not empty, no whitespace or control characters, at most 253 bytes.
pub fn context_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a context name is empty; write the kubeconfig context's name".into());
    }
    if name.len() > MAX_CONTEXT_NAME {
        return Err(format!(
            "context name is {} bytes long, more than {MAX_CONTEXT_NAME}; shorten it",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "context name {name:?} contains {}; kubeconfig context names have none, remove it",
            if c.is_whitespace() {
                "whitespace"
            } else {
                "a control character"
            }
        ));
    }
    Ok(())
}

/// A DNS-1123 label (a namespace name): 1–63 of `a-z`, `0-9`, `-`, starting and ending alphanumeric.
pub fn dns_label(s: &str) -> Result<(), String> {
    const HINT: &str = "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit";
    if s.is_empty() {
        return Err(format!("it is empty; {HINT}"));
    }
    if s.len() > 63 {
        return Err(format!("it is {} characters long; {HINT}", s.len()));
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if let Some(c) = s.chars().find(|&c| !alnum(c) && c != '-') {
        let fix = if c.is_ascii_uppercase() {
            " (lowercase it)"
        } else {
            ""
        };
        return Err(format!("it contains {c:?}{fix}; {HINT}"));
    }
    if !s.starts_with(alnum) || !s.ends_with(alnum) {
        return Err(format!("it starts or ends with '-'; {HINT}"));
    }
    Ok(())
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err("a DNS subdomain has 1 to 253 characters".into());
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    for part in s.split('.') {
        if part.is_empty()
            || !part.chars().all(|c| alnum(c) || c == '-')
            || !part.starts_with(alnum)
            || !part.ends_with(alnum)
        {
            return Err(format!(
                "{s:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.')"
            ));
        }
    }
    Ok(())
}

/// The name part of a qualified name: 1–63 of `A-Za-z0-9-_.`, starting and ending alphanumeric.
fn qualified_name_part(s: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if s.is_empty()
        || s.len() > 63
        || !s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        || !s.starts_with(alnum)
        || !s.ends_with(alnum)
    {
        return Err(format!(
            "{s:?} must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label key: `[prefix/]name`, the prefix a DNS subdomain.
pub fn label_key(s: &str) -> Result<(), String> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|e| format!("label key {s:?}: prefix {e}"))?;
            qualified_name_part(name).map_err(|e| format!("label key {s:?}: name {e}"))
        }
        None => qualified_name_part(s).map_err(|e| format!("label key {e}")),
    }
}

/// A label value: empty, or 1–63 of `A-Za-z0-9-_.`, starting and ending alphanumeric.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    qualified_name_part(s).map_err(|e| format!("label value {e}"))
}

/// A finalizer: a domain-qualified name, `example.com/cleanup`.
pub fn finalizer_name(s: &str) -> Result<(), String> {
    let Some((prefix, name)) = s.split_once('/') else {
        return Err(format!(
            "{s:?} is not domain-qualified; write `<your domain>/<name>`, e.g. \"demo.kubeplex.dev/cleanup\""
        ));
    };
    if !prefix.contains('.') {
        return Err(format!(
            "the prefix {prefix:?} is not a domain; write `<your domain>/<name>`, e.g. \"demo.kubeplex.dev/cleanup\""
        ));
    }
    dns_subdomain(prefix)?;
    qualified_name_part(name)
}

/// Parses `"30s"`, `"5m"`, `"1h30m"`, `"500ms"`, `"2d"` into milliseconds; zero is refused.
pub fn duration_millis(s: &str) -> Result<u64, String> {
    let hint = "write a duration such as \"500ms\", \"30s\", \"5m\", \"1h\" or \"1h30m\"";
    if s.trim().is_empty() {
        return Err(format!("it is empty; {hint}"));
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("{s:?} is not a duration; {hint}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{s:?} is too long a duration"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("{s:?} has a number without a unit; {hint}")),
            other => {
                return Err(format!(
                    "{s:?} has the unknown unit {other:?}; units are ms, s, m, h and d"
                ));
            }
        };
        total = number
            .checked_mul(factor)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("{s:?} is too long a duration"))?;
    }
    if total == 0 {
        return Err(format!("{s:?} is zero; omit the key instead"));
    }
    Ok(total)
}

/// Checks a label selector as the API server parses it: comma-separated requirements
/// `key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key>1`, `key<1`.
pub fn label_selector(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("it is empty; omit `label_selector` to watch every object".into());
    }
    let tokens = lex_selector(s)?;
    let mut i = 0;
    let next = |i: &mut usize| {
        let t = tokens.get(*i).cloned();
        *i += 1;
        t
    };
    loop {
        let mut tok = next(&mut i);
        let negated = tok == Some(Tok::Bang);
        if negated {
            tok = next(&mut i);
        }
        let key = match tok {
            Some(Tok::Word(w)) => w,
            other => {
                return Err(format!(
                    "expected a label key, found {}",
                    describe(other.as_ref())
                ));
            }
        };
        label_key(&key)?;
        if negated {
            match next(&mut i) {
                None => return Ok(()),
                Some(Tok::Comma) => continue,
                other => {
                    return Err(format!(
                        "`!{key}` stands alone; expected ',' or the end, found {}",
                        describe(other.as_ref())
                    ));
                }
            }
        }
        match next(&mut i) {
            None => return Ok(()),
            Some(Tok::Comma) => continue,
            Some(Tok::Op(op)) => {
                let value = match tokens.get(i) {
                    Some(Tok::Word(w)) => {
                        i += 1;
                        w.clone()
                    }
                    _ => String::new(),
                };
                if op == ">" || op == "<" {
                    if value.parse::<i64>().is_err() {
                        return Err(format!(
                            "`{key} {op}` needs an integer value, found {value:?}"
                        ));
                    }
                } else {
                    label_value(&value)?;
                }
            }
            Some(Tok::Word(w)) if w == "in" || w == "notin" => {
                if next(&mut i) != Some(Tok::Open) {
                    return Err(format!(
                        "`{key} {w}` needs a list of values: `{key} {w} (a, b)`"
                    ));
                }
                let mut values = 0;
                loop {
                    match next(&mut i) {
                        Some(Tok::Word(v)) => {
                            label_value(&v)?;
                            values += 1;
                        }
                        Some(Tok::Close) if values > 0 => break,
                        other => {
                            return Err(format!(
                                "expected a value in `{key} {w} (..)`, found {}",
                                describe(other.as_ref())
                            ));
                        }
                    }
                    match next(&mut i) {
                        Some(Tok::Comma) => {}
                        Some(Tok::Close) => break,
                        other => {
                            return Err(format!(
                                "expected ',' or ')' in `{key} {w} (..)`, found {}",
                                describe(other.as_ref())
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(format!(
                    "expected an operator (=, ==, !=, in, notin, >, <), ',' or the end after `{key}`, found {}",
                    describe(other.as_ref())
                ));
            }
        }
        match next(&mut i) {
            None => return Ok(()),
            Some(Tok::Comma) => {}
            other => {
                return Err(format!(
                    "expected ',' between requirements, found {}",
                    describe(other.as_ref())
                ));
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Op(&'static str),
    Bang,
    Comma,
    Open,
    Close,
}

fn describe(tok: Option<&Tok>) -> String {
    match tok {
        None => "the end".into(),
        Some(Tok::Word(w)) => format!("`{w}`"),
        Some(Tok::Op(op)) => format!("`{op}`"),
        Some(Tok::Bang) => "`!`".into(),
        Some(Tok::Comma) => "`,`".into(),
        Some(Tok::Open) => "`(`".into(),
        Some(Tok::Close) => "`)`".into(),
    }
}

fn lex_selector(s: &str) -> Result<Vec<Tok>, String> {
    let mut tokens = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            ',' => {
                chars.next();
                tokens.push(Tok::Comma);
            }
            '(' => {
                chars.next();
                tokens.push(Tok::Open);
            }
            ')' => {
                chars.next();
                tokens.push(Tok::Close);
            }
            '=' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    tokens.push(Tok::Op("=="));
                } else {
                    tokens.push(Tok::Op("="));
                }
            }
            '!' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    tokens.push(Tok::Op("!="));
                } else {
                    tokens.push(Tok::Bang);
                }
            }
            '>' | '<' => {
                chars.next();
                tokens.push(Tok::Op(if c == '>' { ">" } else { "<" }));
            }
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/') => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/') {
                        word.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Tok::Word(word));
            }
            other => return Err(format!("unexpected character {other:?}")),
        }
    }
    Ok(tokens)
}

/// Checks a field selector: comma-separated `field=value`, `field==value` or `field!=value`, where `\`
/// escapes `,`, `=`, `!` and `\` in values.
pub fn field_selector(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("it is empty; omit `field_selector` to watch every object".into());
    }
    // Split on unescaped commas.
    let mut terms = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ (',' | '=' | '!' | '\\')) => {
                    let last = terms.last_mut().expect("never empty");
                    last.push('\\');
                    last.push(e);
                }
                _ => return Err("'\\' escapes only ',', '=', '!' and '\\'".into()),
            },
            ',' => terms.push(String::new()),
            c => terms.last_mut().expect("never empty").push(c),
        }
    }
    for term in &terms {
        let term = term.trim();
        let (field, _op, value) = ["!=", "==", "="]
            .iter()
            .find_map(|op| term.split_once(op).map(|(f, v)| (f, *op, v)))
            .ok_or_else(|| {
                format!("{term:?} has no operator; write `field=value`, `field==value` or `field!=value`")
            })?;
        let field = field.trim();
        if field.is_empty()
            || !field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return Err(format!(
                "{field:?} is not a field path; fields look like `metadata.name` or `status.phase`"
            ));
        }
        let mut unescaped = value.chars();
        while let Some(c) = unescaped.next() {
            match c {
                '\\' => {
                    unescaped.next();
                }
                '=' | '!' => {
                    return Err(format!(
                        "the value of {term:?} has an unescaped {c:?}; escape it as \"\\\\{c}\""
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab() {
        assert_eq!(kebab_case("AppDeployer"), "app-deployer");
        assert_eq!(kebab_case("HTTPProxy"), "http-proxy");
        assert_eq!(kebab_case("My_Thing2"), "my-thing2");
        assert_eq!(kebab_case("X"), "x");
        assert_eq!(kebab_case("AppV2Reconciler"), "app-v2-reconciler");
        assert!(controller_name(&kebab_case("DnsRecordController")).is_ok());
    }

    #[test]
    fn durations() {
        assert_eq!(duration_millis("30s"), Ok(30_000));
        assert_eq!(duration_millis("5m"), Ok(300_000));
        assert_eq!(duration_millis("1h"), Ok(3_600_000));
        assert_eq!(duration_millis("500ms"), Ok(500));
        assert_eq!(duration_millis("1h30m"), Ok(5_400_000));
        assert_eq!(duration_millis("2d"), Ok(172_800_000));
        for bad in [
            "",
            "30",
            "s",
            "5 m",
            "1x",
            "0s",
            "-1s",
            "99999999999999999999d",
            "1.5h",
        ] {
            assert!(duration_millis(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn namespaces_and_contexts() {
        assert!(dns_label("crds").is_ok());
        assert!(dns_label("namespace-a").is_ok());
        for bad in ["", "Crds", "-a", "a-", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns_label(bad).is_err(), "{bad:?} accepted");
        }
        assert!(context_name("kind-cluster-a").is_ok());
        assert!(context_name("arn:aws:eks:eu-west-1:1234:cluster/prod").is_ok());
        for bad in ["", "a b", "a\tb", "a\u{7}", &"a".repeat(254)] {
            assert!(context_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn finalizers() {
        assert!(finalizer_name("demo.kubeplex.dev/cleanup").is_ok());
        for bad in [
            "cleanup",
            "demo/cleanup",
            "Demo.dev/x",
            "a.dev/",
            "a.dev/-x",
            "a..dev/x",
        ] {
            assert!(finalizer_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn label_selectors() {
        for good in [
            "app",
            "app==",
            "!app",
            "app=web",
            "app==web",
            "app!=web",
            "app=",
            "app in (a, b),tier notin (db)",
            "example.com/team=x, env",
            "replicas>1",
            "app.kubernetes.io/name=web",
        ] {
            assert!(
                label_selector(good).is_ok(),
                "{good:?}: {:?}",
                label_selector(good)
            );
        }
        for bad in [
            "",
            "app=web tier=db",
            "app in a",
            "app in ()",
            "app in (a b)",
            "=web",
            "app=we b",
            "app=-web",
            "!app=web",
            "app>x",
            "App_/x=y",
            "app=web,",
            "app ~ web",
        ] {
            assert!(label_selector(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn field_selectors() {
        for good in [
            "metadata.name=x",
            "status.phase!=Running,spec.nodeName==",
            "metadata.name=a\\,b",
        ] {
            assert!(
                field_selector(good).is_ok(),
                "{good:?}: {:?}",
                field_selector(good)
            );
        }
        for bad in ["", "metadata.name", "=x", "a b=c", "x=a=b", "x=a\\q"] {
            assert!(field_selector(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn controller_names() {
        assert!(controller_name("app-deployer").is_ok());
        assert!(controller_name("a.b-c1").is_ok());
        for bad in ["", "App", "a_b", "-a", &"a".repeat(129)] {
            assert!(controller_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
