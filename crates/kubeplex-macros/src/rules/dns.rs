//! Kubernetes object-name rules: DNS-1123 labels and subdomains, qualified names, label keys and values.

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

/// Why `namespace` cannot be one, as the attribute reports it (and the runtime, for namespaces given at run
/// time: `kubeplex::Plan::problem`, checked against this in the tests below).
pub fn invalid_namespace(namespace: &str) -> Option<String> {
    dns_label(namespace)
        .err()
        .map(|why| format!("invalid namespace {namespace:?}: {why}"))
}

/// A namespace given twice in one list, as the attribute and the runtime report it.
pub fn duplicate_namespace(namespace: &str) -> String {
    format!("namespace {namespace:?} is listed twice; remove one")
}

/// An empty list of namespaces, as the attribute and the runtime begin to report it (the fix differs:
/// omit the key, or call `all_namespaces()`).
pub const EMPTY_NAMESPACES: &str = "`namespaces = []` watches nothing";

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
pub fn qualified_name_part(s: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert!(dns_label("crds").is_ok());
        assert!(dns_label("namespace-a").is_ok());
        for bad in ["", "Crds", "-a", "a-", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns_label(bad).is_err(), "{bad:?} accepted");
        }
        assert!(dns_subdomain("demo.kubeplex.dev").is_ok());
        assert!(dns_subdomain("a..b").is_err());
        assert!(label_key("example.com/team").is_ok() && label_key("App_/x").is_err());
        assert!(label_value("").is_ok() && label_value("-x").is_err());
    }

    /// The runtime checks namespaces given at run time (`Manager::controller_with`) with a copy of these
    /// rules: its words must stay the attribute's.
    #[test]
    fn the_runtime_reports_namespaces_in_the_attributes_words() {
        use kubeplex::{ContextName, Plan};
        let plan = || Plan::new("x").contexts([ContextName::new("c")]);
        let long = "a".repeat(64);
        for bad in [
            "",
            "Crds",
            "Bad_NS",
            "-a",
            "a-",
            "a_b",
            "a.b",
            long.as_str(),
        ] {
            let attribute = invalid_namespace(bad).unwrap();
            assert_eq!(
                plan().namespaces([bad.to_owned()]).problem(),
                Some(attribute)
            );
        }
        assert_eq!(invalid_namespace("team-a"), None);
        assert_eq!(
            plan().namespaces(["a", "a"]).problem(),
            Some(duplicate_namespace("a"))
        );
        let empty = plan().namespaces(Vec::<String>::new()).problem().unwrap();
        assert!(empty.starts_with(EMPTY_NAMESPACES), "{empty}");
    }
}
