//! The default controller name. The rules for the names the attribute takes (controller, context,
//! finalizer and namespace names) are `kubeplex-names`', which the runtime checks with too.

use heck::ToKebabCase;

/// The default controller name: `AppDeployer` → `app-deployer`, `HTTPProxy` → `http-proxy`.
pub fn kebab_case(ident: &str) -> String {
    ident.strip_prefix("r#").unwrap_or(ident).to_kebab_case()
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
        assert!(kubeplex_names::controller_name(&kebab_case("DnsRecordController")).is_ok());
    }
}
