//! Names the attribute takes: controller, context and finalizer names, and the default controller name.

use heck::ToKebabCase;

use super::dns::{dns_subdomain, qualified_name_part};

/// The longest context name (a DNS subdomain's limit; kubeconfig names are rarely longer).
pub const MAX_CONTEXT_NAME: usize = 253;

/// The longest controller name: a Kubernetes label value's limit.
pub const MAX_CONTROLLER_NAME: usize = 63;

/// The default controller name: `AppDeployer` → `app-deployer`, `HTTPProxy` → `http-proxy`.
pub fn kebab_case(ident: &str) -> String {
    ident.strip_prefix("r#").unwrap_or(ident).to_kebab_case()
}

/// A controller name: it becomes the field manager, a metrics label, the value of the controller label on
/// children (a label value: at most 63 characters) and part of the default finalizer `kubeplex.dev/<name>`.
pub fn controller_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "the controller name is empty; omit `name` to use the struct's name in kebab-case"
                .into(),
        );
    }
    if name.len() > MAX_CONTROLLER_NAME {
        return Err(format!(
            "the controller name {name:?} is {} characters long; it is a label value on every child and part of the default finalizer `kubeplex.dev/<name>`, so at most {MAX_CONTROLLER_NAME}: shorten it",
            name.len()
        ));
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
    fn controller_names() {
        assert!(controller_name("app-deployer").is_ok());
        assert!(controller_name("a.b-c1").is_ok());
        for bad in ["", "App", "a_b", "-a", &"a".repeat(64)] {
            assert!(controller_name(bad).is_err(), "{bad:?} accepted");
        }
    }
    #[test]
    fn contexts() {
        assert!(context_name("kind-cluster-a").is_ok());
        assert!(context_name("arn:aws:eks:eu-west-1:1234:cluster/prod").is_ok());
        for bad in ["", "a b", "a\tb", "a\u{7}", &"a".repeat(254)] {
            assert!(context_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
