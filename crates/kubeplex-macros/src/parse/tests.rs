//! The grammar of `#[controller]`: what parses, and darling's errors for what does not.

use darling::Error;
use proc_macro2::TokenStream;
use quote::quote;

use super::{ControllerArgs, parse_args};

fn parse(tokens: TokenStream) -> (ControllerArgs, Vec<String>) {
    let mut errors = Error::accumulator();
    let args = parse_args(tokens, &mut errors);
    let messages = errors
        .into_inner()
        .into_iter()
        .flat_map(Error::flatten)
        .map(|e| e.to_string())
        .collect();
    (args, messages)
}

#[test]
fn every_key_parses() {
    let (args, errors) = parse(quote! {
        crd = App, contexts = [Fleet::A], fleet = Fleet, namespaces = ["a"], name = "n",
        label_selector = "a=b", field_selector = "x=y", concurrency = 3, debounce = "1s",
        requeue_after = "1h", error_requeue = "5s", finalizer = "a.b/c", crate = kp,
        abandon_unreachable_after = "1h", abandon_terminating_after = "10m", members,
        owns(Deployment, contexts = [Fleet::B], namespaces = ["b"]),
        owns(Service, contexts = [Fleet::B], prune = keep, on_delete = orphan)
    });
    assert!(errors.is_empty(), "{errors:?}");
    assert!(args.crd.0.is_some() && args.fleet.is_some() && args.krate.is_some());
    assert!(args.abandon_unreachable_after.is_some() && args.abandon_terminating_after.is_some());
    assert!(args.members.0.is_some());
    assert_eq!(args.owns.len(), 2);
    assert_eq!(
        args.owns[0]
            .options
            .namespaces
            .as_ref()
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(args.concurrency.unwrap().0.base10_digits(), "3");
    let service = &args.owns[1].options;
    let word = |w: &Option<crate::parse::Word>| w.as_ref().map(|w| w.0.to_string());
    assert_eq!(word(&service.prune).as_deref(), Some("keep"));
    assert_eq!(word(&service.on_delete).as_deref(), Some("orphan"));
}

#[test]
fn generic_crd_type() {
    let (args, errors) = parse(quote!(crd = Wrapper<Kind>, contexts = ["a"]));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(args.crd.0.is_some());
}

#[test]
fn unknown_keys_suggest() {
    let (args, errors) = parse(quote!(
        contexts = ["a"],
        namespace = ["x"],
        crds = B,
        zzz = 1
    ));
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0].contains("Did you mean `namespaces`?"),
        "{errors:?}"
    );
    assert!(errors[1].contains("Did you mean `crd`?"), "{errors:?}");
    // A misspelled required key counts as given: it is not also reported missing.
    assert!(args.given_but_invalid.iter().any(|k| k == "crd"));
}

#[test]
fn repeated_key() {
    let (_, errors) = parse(quote!(crd = A, crd = B, contexts = ["a"]));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("more than once"));
}

#[test]
fn shapes() {
    let (_, errors) = parse(quote!(
        crd = "A",
        contexts = "a",
        namespaces = [1],
        name = 3,
        concurrency = "3",
        owns = 1
    ));
    assert_eq!(errors.len(), 6, "{errors:?}");
}

#[test]
fn owns_grammar() {
    let (_, errors) = parse(quote!(
        owns(contexts = ["a"]),
        owns(),
        owns(D, context = ["a"])
    ));
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[2].contains("Did you mean `contexts`?"), "{errors:?}");
}

#[test]
fn owns_members_flag() {
    let (args, errors) = parse(quote!(
        owns(
            Deployment,
            members,
            contexts = [Fleet::B],
            namespaces = ["b"]
        ),
        owns(Service, members),
        owns(Secret, contexts = [Fleet::B])
    ));
    assert!(errors.is_empty(), "{errors:?}");
    let members: Vec<bool> = args
        .owns
        .iter()
        .map(|o| o.options.members.0.is_some())
        .collect();
    assert_eq!(members, [true, true, false]);
    assert!(args.owns[0].options.contexts.is_some());
    assert!(args.owns[1].options.contexts.is_none());
}

#[test]
fn owns_members_is_a_flag() {
    // `members = Wrapper<Kind>` is not an expression: darling hands it to `from_invalid_expr`.
    let (args, errors) = parse(quote!(
        owns(Deployment, members = true, contexts = ["a"]),
        owns(Service, members(all), contexts = ["a"]),
        owns(Secret, members = Wrapper<Kind>, contexts = ["a"])
    ));
    assert_eq!(errors.len(), 3, "{errors:?}");
    for error in &errors {
        assert!(
            error.contains("`members` is a flag and takes no value: write `members` alone"),
            "{errors:?}"
        );
    }
    assert!(args.owns.is_empty());
}

#[test]
fn owns_repeated_key() {
    let (_, errors) = parse(quote!(
        owns(Deployment, members, contexts = ["a"], members),
        owns(Service, contexts = ["a"], contexts = ["b"], context = ["c"])
    ));
    // Every mistake of an `owns` at once: the repeated key and the unknown one.
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("`members` is given more than once in `owns(Deployment, ..)`; keep one"),
        "{errors:?}"
    );
    assert!(
        errors[1]
            .starts_with("`contexts` is given more than once in `owns(Service, ..)`; keep one"),
        "{errors:?}"
    );
    assert!(errors[2].contains("Did you mean `contexts`?"), "{errors:?}");
}

#[test]
fn members_at_the_top_level_is_a_flag() {
    let (args, errors) = parse(quote!(crd = App, contexts = [Fleet::A]));
    assert!(errors.is_empty() && args.members.0.is_none());
    let (_, errors) = parse(quote!(crd = App, contexts = [Fleet::A], members = true));
    assert_eq!(
        errors,
        [
            "`members` is a flag and takes no value: write `members` alone (or leave it out) at members"
        ]
    );
    let (_, errors) = parse(quote!(crd = App, contexts = [Fleet::A], members, members));
    assert_eq!(errors, ["`members` is given more than once; keep one"]);
}
