//! Errors that may carry credentials, described without them.
//!
//! A kubeconfig holds tokens, passwords and client keys. The YAML parser's message quotes the lines around
//! an error, and serde's messages quote the offending value; either may be a secret. What reaches an error,
//! a log line, a probe body, a status or an Event is the file, the line and column, and the parser's reason
//! with every quoted value replaced.

use kube::config::KubeconfigError;

use super::error::chain;

/// A kubeconfig error in words that never contain the file's text.
pub(crate) fn kubeconfig_error(error: &KubeconfigError) -> String {
    match error {
        KubeconfigError::Parse(parse) => {
            let parse = parse.without_snippet();
            let at = parse
                .location()
                .map(|l| format!("line {}, column {}: ", l.line(), l.column()))
                .unwrap_or_default();
            // The first line is the reason; the rest, if any, is context from the file.
            let reason = parse.to_string();
            let reason = reason.lines().next().unwrap_or_default();
            let reason = reason.split(" at line ").next().unwrap_or(reason);
            format!("not a valid kubeconfig: {at}{}", redact_quoted(reason))
        }
        other => redact_quoted(&chain(other)),
    }
}

/// `text` with every quoted part (`"…"`, `'…'`, `` `…` ``) replaced by `…`.
pub(super) fn redact_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                quote = None;
            }
            Some(_) => {}
            None => {
                // An apostrophe inside a word (`it's`) opens no quote.
                let in_word = out.chars().last().is_some_and(char::is_alphanumeric);
                if matches!(c, '"' | '`') || (c == '\'' && !in_word) {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    if quote.is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use kube::config::Kubeconfig;

    use super::*;

    const TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6InNlY3JldC10b2tlbi12YWx1ZSJ9";
    const PASSWORD: &str = "hunter2-very-secret-password";
    const KEY: &str = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCnNlY3JldGtleQo=";

    /// Kubeconfigs broken right next to a credential.
    fn broken() -> Vec<String> {
        vec![
            format!(
                "apiVersion: v1\nkind: Config\nusers:\n- name: a\n  user:\n    token: {TOKEN}\n   bad: indentation\n"
            ),
            format!(
                "apiVersion: v1\nusers:\n- name: a\n  user:\n    password: {PASSWORD}\n    username: [unclosed\n"
            ),
            format!(
                "apiVersion: v1\nusers:\n- name: a\n  user:\n    client-key-data: {{ {KEY} }}\n"
            ),
            format!("apiVersion: v1\nusers:\n- name: a\n  user:\n    token: [\"{TOKEN}\"]\n"),
            format!("apiVersion: v1\nusers: \"{TOKEN}\"\n"),
        ]
    }

    #[test]
    fn a_broken_kubeconfig_is_described_by_place_and_reason_never_by_its_text() {
        let dir = tempfile::tempdir().unwrap();
        for (i, text) in broken().into_iter().enumerate() {
            let path = dir.path().join(format!("config-{i}"));
            std::fs::write(&path, &text).unwrap();
            let error = Kubeconfig::read_from(&path).expect_err(&text);
            let described = kubeconfig_error(&error);
            for secret in [TOKEN, PASSWORD, KEY, "hunter2", "eyJhbGci"] {
                assert!(!described.contains(secret), "case {i} leaks: {described}");
            }
            assert!(
                described.contains("line "),
                "case {i} names no place: {described}"
            );
        }
    }

    #[test]
    fn quoted_values_are_replaced() {
        assert_eq!(
            redact_quoted(r#"invalid type: string "s3cr3t", expected a sequence"#),
            r#"invalid type: string "…", expected a sequence"#
        );
        assert_eq!(
            redact_quoted("unknown field `tokn`, expected one of `token`"),
            "unknown field `…`, expected one of `…`"
        );
        assert_eq!(redact_quoted("it's fine"), "it's fine");
        assert_eq!(redact_quoted("cut \"off"), "cut \"…");
    }
}
