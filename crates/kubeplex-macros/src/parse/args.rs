//! The attribute as a whole: one field per key, one doc line per field, and how its arguments are parsed.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::TokenStream;

use super::keys::{key_of, path_of};
use super::owns::Owns;
use super::values::{ContextList, Flag, Int, PathArg, Str, StrList, TypeArg};
use super::watches::Watches;

/// Everything `#[controller(...)]` accepts.
#[derive(Debug, Default, FromMeta)]
pub struct ControllerArgs {
    /// `crd = Type` (required): the primary resource, any `kube::Resource<DynamicType = ()>`.
    #[darling(default)]
    pub crd: TypeArg,
    /// `contexts = [Fleet::A, ..]` or `["name", ..]` (required, non-empty): where the primary resource is watched.
    pub contexts: Option<ContextList>,
    /// `members` (a flag): the primary resource is also watched in every member of the fleet (clusters
    /// discovered at run time), in the same namespaces.
    #[darling(default)]
    pub members: Flag,
    /// `ignore_readiness_flips` (a flag): a cluster that stops answering, or answers again, does not
    /// reconcile the parents.
    #[darling(default)]
    pub ignore_readiness_flips: Flag,
    /// `fleet = Fleet` (optional): the `contexts!` enum that string-literal contexts must belong to.
    pub fleet: Option<PathArg>,
    /// `namespaces = ["ns", ..]` (default: every namespace): DNS-1123 labels to watch the primary resource in.
    pub namespaces: Option<StrList>,
    /// `name = "my-controller"` (default: the struct's name in kebab-case): logs, metrics, field manager.
    pub name: Option<Str>,
    /// `label_selector = "app=web,tier!=db"` (optional): watch only objects whose labels match.
    pub label_selector: Option<Str>,
    /// `field_selector = "metadata.name=x"` (optional): watch only objects whose fields match.
    pub field_selector: Option<Str>,
    /// `concurrency = 8` (default: unbounded): at most this many reconciles at once, 1..=65535.
    pub concurrency: Option<Int>,
    /// `concurrency_per_cluster = 2` (default: none): at most this many reconciles at once of objects from
    /// one cluster, 1..=65535.
    pub concurrency_per_cluster: Option<Int>,
    /// `debounce = "1s"` (optional): wait this long for more events on an object before reconciling it.
    pub debounce: Option<Str>,
    /// `requeue_after = "1h"` (optional): reconcile every object again this long after a success.
    pub requeue_after: Option<Str>,
    /// `error_requeue = "30s"` (default: 5s): retry a failed reconcile after this long.
    pub error_requeue: Option<Str>,
    /// `finalizer = "example.com/cleanup"` (optional): a domain-qualified finalizer kept on primary objects.
    pub finalizer: Option<Str>,
    /// `abandon_unreachable_after = "1h"` (default: never): on deletion, give up on a child cluster that
    /// stays unreachable this long, leaving its children (recorded in status and an event).
    pub abandon_unreachable_after: Option<Str>,
    /// `abandon_terminating_after = "1h"` (default: never): on deletion, stop waiting for children that
    /// were deleted but are still there this long after (kept by finalizers of their own), leaving them
    /// (recorded in status and an event).
    pub abandon_terminating_after: Option<Str>,
    /// `crate = path` (default: `::kubeplex`): where the kubeplex crate is, for a renamed dependency.
    #[darling(rename = "crate")]
    pub krate: Option<PathArg>,
    /// `owns(Kind, members, contexts = [..], namespaces = [..])` (repeatable): a kind of child object and
    /// where it lives.
    #[darling(multiple)]
    pub owns: Vec<Owns>,
    /// `watches(Kind, members, contexts = [..], namespaces = [..], map = path)` (repeatable): a kind watched
    /// without being reconciled or owned, and which parents its changes reconcile.
    #[darling(multiple)]
    pub watches: Vec<Watches>,
    /// Keys that were given but could not be parsed (or were misspelled as them), so that validation
    /// does not also report them as missing.
    #[darling(skip)]
    pub given_but_invalid: Vec<String>,
}

/// The keys that may be given more than once.
const REPEATABLE: &[&str] = &["owns", "watches"];

/// Parses the attribute's arguments, reporting unknown and repeated keys without giving up on the rest.
pub fn parse_args(tokens: TokenStream, errors: &mut darling::error::Accumulator) -> ControllerArgs {
    let items = match NestedMeta::parse_meta_list(tokens) {
        Ok(items) => items,
        Err(e) => {
            errors.push(e.into());
            return ControllerArgs::default();
        }
    };
    // Each item is parsed on its own first, so that one malformed value drops only its own key (and is
    // remembered as given) instead of the whole attribute; darling reports unknown keys.
    let mut good: Vec<NestedMeta> = Vec::new();
    let mut given_but_invalid = Vec::new();
    for item in items {
        let key = key_of(&item);
        match ControllerArgs::from_list(std::slice::from_ref(&item)) {
            Ok(_)
                if !REPEATABLE.contains(&key.as_str()) && good.iter().any(|g| key_of(g) == key) =>
            {
                errors.push(
                    Error::custom(format!("`{key}` is given more than once; keep one"))
                        .with_span(&path_of(&item)),
                );
            }
            Ok(_) => good.push(item),
            Err(e) => {
                // A misspelled key may be a required one: remember what darling suggests, so that
                // validation does not also report that key as missing.
                given_but_invalid.extend(suggestion(&e));
                given_but_invalid.push(key.clone());
                errors.push(e);
            }
        }
    }
    let mut args = errors
        .handle(ControllerArgs::from_list(&good))
        .unwrap_or_default();
    args.given_but_invalid = given_but_invalid;
    args
}

/// The key darling suggests in an unknown-key error ("Did you mean `namespaces`?"), if any.
fn suggestion(error: &Error) -> Option<String> {
    let text = error.to_string();
    let (_, rest) = text.split_once("Did you mean `")?;
    let (key, _) = rest.split_once('`')?;
    Some(key.to_owned())
}
