//! Label and field selectors, parsed as the API server parses them.

use kubeplex_names::{label_key, label_value};

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
}
