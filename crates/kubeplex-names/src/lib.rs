//! The naming rules kubeplex checks, written once: `#[controller]` (in `kubeplex-macros`) checks what its
//! attribute is given while compiling, and the `kubeplex` runtime checks plans written by hand, values given
//! at run time and member names, with these same functions, so both report a wrong name in the same words.
//!
//! Each rule is a plain function on a string: `Ok(())`, or why the value is wrong and how to fix it, in a
//! sentence meant to be shown as it is.
#![deny(missing_docs)]

/// The longest DNS-1123 label, label value or name part of a qualified name (a Kubernetes label key's
/// name): 63 characters.
pub const MAX_LABEL: usize = 63;

/// The longest DNS-1123 subdomain: 253 characters.
pub const MAX_SUBDOMAIN: usize = 253;

/// The longest controller name: it is a label value on every child, so [`MAX_LABEL`].
pub const MAX_CONTROLLER_NAME: usize = MAX_LABEL;

/// The longest context name (a DNS subdomain's limit; kubeconfig context names are rarely longer).
pub const MAX_CONTEXT_NAME: usize = MAX_SUBDOMAIN;

/// What [`dns_label`] says to do after saying what is wrong.
const LABEL_HINT: &str =
    "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit";

/// A lowercase letter or a digit: what a DNS-1123 label starts and ends with.
fn lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Whether `s` is not empty, is made of `edge` and `inner` characters, and starts and ends with an `edge`
/// one: the shape of every name here.
fn edged(s: &str, edge: fn(char) -> bool, inner: fn(char) -> bool) -> bool {
    s.chars().all(|c| edge(c) || inner(c)) && s.starts_with(edge) && s.ends_with(edge)
}

/// A DNS-1123 label (a namespace name, a member or cluster name): 1–63 of `a-z`, `0-9`, `-`, starting and
/// ending with a letter or digit.
pub fn dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("it is empty; {LABEL_HINT}"));
    }
    if s.len() > MAX_LABEL {
        return Err(format!("it is {} characters long; {LABEL_HINT}", s.len()));
    }
    if let Some(c) = s.chars().find(|&c| !lower_alnum(c) && c != '-') {
        let fix = if c.is_ascii_uppercase() {
            " (lowercase it)"
        } else {
            ""
        };
        return Err(format!("it contains {c:?}{fix}; {LABEL_HINT}"));
    }
    if !s.starts_with(lower_alnum) || !s.ends_with(lower_alnum) {
        return Err(format!("it starts or ends with '-'; {LABEL_HINT}"));
    }
    Ok(())
}

/// A DNS-1123 subdomain: dot-separated DNS-1123 labels, 1–253 characters in all.
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > MAX_SUBDOMAIN {
        return Err(format!(
            "a DNS subdomain has 1 to {MAX_SUBDOMAIN} characters"
        ));
    }
    if !s
        .split('.')
        .all(|label| edged(label, lower_alnum, |c| c == '-'))
    {
        return Err(format!(
            "{s:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.')"
        ));
    }
    Ok(())
}

/// The name part of a qualified name (a label key without its prefix, a finalizer after its `/`): 1–63 of
/// `A-Za-z0-9-_.`, starting and ending with a letter or digit.
pub fn qualified_name_part(s: &str) -> Result<(), String> {
    let inner = |c| matches!(c, '-' | '_' | '.');
    if s.len() > MAX_LABEL || !edged(s, |c| c.is_ascii_alphanumeric(), inner) {
        return Err(format!(
            "{s:?} must be 1 to {MAX_LABEL} letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label key: `[prefix/]name`, the prefix a DNS subdomain and the name a [`qualified_name_part`].
pub fn label_key(s: &str) -> Result<(), String> {
    match s.split_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|e| format!("label key {s:?}: prefix {e}"))?;
            qualified_name_part(name).map_err(|e| format!("label key {s:?}: name {e}"))
        }
        None => qualified_name_part(s).map_err(|e| format!("label key {e}")),
    }
}

/// A label value: empty, or a [`qualified_name_part`] (1–63 of `A-Za-z0-9-_.`, starting and ending with a
/// letter or digit).
pub fn label_value(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Ok(());
    }
    qualified_name_part(s).map_err(|e| format!("label value {e}"))
}

/// Why `namespace` cannot be a namespace (not a [`dns_label`]), as the attribute and the runtime report it.
pub fn invalid_namespace(namespace: &str) -> Option<String> {
    dns_label(namespace)
        .err()
        .map(|why| format!("invalid namespace {namespace:?}: {why}"))
}

/// A namespace given twice in one list, as the attribute and the runtime report it.
pub fn duplicate_namespace(namespace: &str) -> String {
    format!("namespace {namespace:?} is listed twice; remove one")
}

/// An empty list of namespaces, as the attribute and the runtime begin to report it (the fix differs: omit
/// the key, or call `all_namespaces()`).
pub const EMPTY_NAMESPACES: &str = "`namespaces = []` watches nothing";

/// A controller name: it becomes the field manager, a metrics label, the value of the controller label on
/// children (a label value: at most [`MAX_CONTROLLER_NAME`]) and part of the default finalizer
/// `kubeplex.dev/<name>`; lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit.
pub fn controller_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "the controller name is empty; give one such as \"app-deployer\" (in #[controller], omit `name` to use the struct's name in kebab-case)"
                .into(),
        );
    }
    if name.len() > MAX_CONTROLLER_NAME {
        return Err(format!(
            "the controller name {name:?} is {} characters long; it is a label value on every child and part of the default finalizer `kubeplex.dev/<name>`, so at most {MAX_CONTROLLER_NAME}: shorten it",
            name.len()
        ));
    }
    if !edged(name, lower_alnum, |c| c == '-' || c == '.') {
        return Err(format!(
            "controller name {name:?} must be lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, e.g. \"app-deployer\""
        ));
    }
    Ok(())
}

/// A kubeconfig context name: not empty, no whitespace or control characters, at most
/// [`MAX_CONTEXT_NAME`] bytes.
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

/// A finalizer: a domain-qualified name, `example.com/cleanup` (the prefix a [`dns_subdomain`] with a dot,
/// the name a [`qualified_name_part`]).
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

/// An object's name as the API server takes it for any kind (a path segment): not empty, not `.` or
/// `..`, no `/` or `%`, no whitespace or control characters, at most [`MAX_SUBDOMAIN`] bytes. Most kinds
/// ask for a [`dns_subdomain`]; some (RBAC's) allow more, which this still bounds.
pub fn object_name(s: &str) -> Result<(), String> {
    if s.is_empty() || s == "." || s == ".." {
        return Err(format!("object name {s:?} is not a name"));
    }
    if s.len() > MAX_SUBDOMAIN {
        return Err(format!(
            "object name is {} bytes long, more than {MAX_SUBDOMAIN}",
            s.len()
        ));
    }
    match s
        .chars()
        .find(|c| matches!(c, '/' | '%') || c.is_whitespace() || c.is_control())
    {
        Some(c) => Err(format!("object name {s:?} contains {c:?}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rule` accepts each of `good`.
    #[track_caller]
    fn accepts(rule: fn(&str) -> Result<(), String>, good: &[&str]) {
        for name in good {
            assert_eq!(rule(name), Ok(()), "{name:?}");
        }
    }

    /// `rule` refuses each of `bad`, saying `words`.
    #[track_caller]
    fn refuses(rule: fn(&str) -> Result<(), String>, bad: &[&str], words: &str) {
        for name in bad {
            let why = rule(name).expect_err(name);
            assert!(
                why.contains(words),
                "{name:?}: {why:?} does not say {words:?}"
            );
        }
    }

    #[test]
    fn dns_labels() {
        accepts(
            dns_label,
            &[
                "a",
                "0",
                "crds",
                "namespace-a",
                "a-b-c",
                "1a",
                &"a".repeat(63),
            ],
        );
        let cases = [
            ("", "it is empty".to_owned()),
            ("Crds", "it contains 'C' (lowercase it)".to_owned()),
            ("a_b", "it contains '_'".to_owned()),
            ("a.b", "it contains '.'".to_owned()),
            ("a b", "it contains ' '".to_owned()),
            ("é", "it contains 'é'".to_owned()),
            ("-a", "it starts or ends with '-'".to_owned()),
            ("a-", "it starts or ends with '-'".to_owned()),
            ("-", "it starts or ends with '-'".to_owned()),
            (&"a".repeat(64), "it is 64 characters long".to_owned()),
        ];
        for (bad, why) in cases {
            assert_eq!(
                dns_label(bad),
                Err(format!("{why}; {LABEL_HINT}")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn object_names() {
        accepts(
            object_name,
            &["crd-a", "system:controller:x", "a.b", &"a".repeat(253)],
        );
        refuses(object_name, &["", ".", ".."], "is not a name");
        refuses(object_name, &["a/b", "a%2f", "a b", "a\nb"], "contains");
        refuses(object_name, &[&"a".repeat(254)], "more than 253");
    }

    #[test]
    fn dns_subdomains() {
        accepts(
            dns_subdomain,
            &["a", "demo.kubeplex.dev", "a-b.c1", &"a".repeat(253)],
        );
        let bad = ["a..b", ".a", "a.", "A.dev", "a_b.dev", "-a.dev", "a-.dev"];
        refuses(dns_subdomain, &bad, "is not a DNS subdomain");
        refuses(
            dns_subdomain,
            &["", &"a".repeat(254)],
            "has 1 to 253 characters",
        );
    }

    #[test]
    fn qualified_name_parts() {
        accepts(
            qualified_name_part,
            &["a", "App_Name.v1", "a-b", "A9", &"a".repeat(63)],
        );
        let bad = ["", "-a", "a_", ".a", "a/b", "a b", &"a".repeat(64)];
        refuses(qualified_name_part, &bad, "must be 1 to 63 letters");
    }

    #[test]
    fn label_keys_and_values() {
        accepts(
            label_key,
            &["app", "example.com/team", "kubeplex.dev/parent-uid", "A_b"],
        );
        refuses(label_key, &["App_/x"], "label key \"App_/x\": prefix");
        refuses(label_key, &["a.dev/-x", "a/b/c"], ": name");
        refuses(label_key, &[""], "label key \"\" must be");
        accepts(label_value, &["", "web", "Web_1.x", &"a".repeat(63)]);
        refuses(
            label_value,
            &["-x", "x-", "a b", &"a".repeat(64)],
            "label value",
        );
    }

    #[test]
    fn namespaces() {
        assert_eq!(invalid_namespace("team-a"), None);
        assert_eq!(
            invalid_namespace("Bad_NS").unwrap(),
            format!("invalid namespace \"Bad_NS\": it contains 'B' (lowercase it); {LABEL_HINT}")
        );
        assert_eq!(
            duplicate_namespace("a"),
            "namespace \"a\" is listed twice; remove one"
        );
    }

    #[test]
    fn controller_names() {
        accepts(
            controller_name,
            &["app-deployer", "a.b-c1", "x", "0", &"a".repeat(63)],
        );
        refuses(controller_name, &[""], "is empty");
        refuses(controller_name, &[&"a".repeat(64)], "64 characters long");
        let bad = ["App", "a_b", "-a", "a-", ".a", "a.", "My Controller", "é"];
        refuses(controller_name, &bad, "must be lowercase letters");
    }

    #[test]
    fn context_names() {
        let good = [
            "kind-cluster-a",
            "arn:aws:eks:eu-west-1:1234:cluster/prod",
            "A_b",
        ];
        accepts(context_name, &good);
        accepts(context_name, &[&"a".repeat(253)]);
        refuses(context_name, &[""], "is empty");
        refuses(context_name, &[&"a".repeat(254)], "254 bytes long");
        refuses(context_name, &["a b", "a\tb", "a\n"], "whitespace");
        refuses(context_name, &["a\u{7}"], "a control character");
    }

    #[test]
    fn finalizer_names() {
        accepts(finalizer_name, &["demo.kubeplex.dev/cleanup", "a.b/C_d"]);
        refuses(finalizer_name, &["cleanup"], "not domain-qualified");
        refuses(finalizer_name, &["demo/cleanup"], "is not a domain");
        refuses(
            finalizer_name,
            &["Demo.dev/x", "a..dev/x"],
            "is not a DNS subdomain",
        );
        refuses(
            finalizer_name,
            &["a.dev/", "a.dev/-x"],
            "must be 1 to 63 letters",
        );
    }
}
