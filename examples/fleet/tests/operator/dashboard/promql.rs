//! A small PromQL lexer, and the check that an expression uses only exported series, labels and functions.

use std::collections::BTreeSet;

use super::metrics::series_labels;

/// PromQL functions and aggregations the files may use.
const FUNCTIONS: &[&str] = &[
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "topk",
    "bottomk",
    "rate",
    "irate",
    "increase",
    "delta",
    "deriv",
    "histogram_quantile",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "changes",
    "resets",
    "absent",
    "clamp_min",
    "clamp_max",
    "abs",
    "time",
    "timestamp",
    "vector",
];
/// Keywords followed by a parenthesised list of labels.
const GROUPINGS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
/// Keywords that stand alone.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];

/// What a PromQL expression refers to.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    /// Series names, each with the label names of its selector (`{...}`) and their values.
    pub(crate) series: Vec<(String, Vec<(String, String)>)>,
    /// Labels named in `by (...)`, `without (...)`, `on (...)`, ...
    pub(crate) grouping: Vec<String>,
    pub(crate) functions: Vec<String>,
}

fn ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

pub(crate) fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A small PromQL lexer: enough to find every metric name, label name and function of an expression, so that
/// each one can be checked. Panics, naming the expression, on what it does not understand.
pub(crate) fn refs(expr: &str) -> Refs {
    let chars: Vec<char> = expr.chars().collect();
    let mut refs = Refs::default();
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    let ident = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len() && ident_char(chars[*i]) {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    let string = |i: &mut usize| -> String {
        let quote = chars[*i];
        let start = *i + 1;
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' {
                *i += 1;
            }
            *i += 1;
        }
        assert!(*i < chars.len(), "{expr}: unterminated string");
        *i += 1;
        chars[start..*i - 1].iter().collect()
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || "(),+-*/%^=!<>".contains(c) {
            i += 1;
        } else if c == '"' || c == '\'' || c == '`' {
            string(&mut i);
        } else if c == '[' {
            // A range or subquery: a duration or a variable such as $__rate_interval.
            let end = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .unwrap_or_else(|| panic!("{expr}: unclosed ["));
            i += end + 1;
        } else if c == '$' {
            // A Grafana variable outside a string, e.g. `$__rate_interval` in `[...]` (already skipped) or
            // `${var}`.
            i += 1;
            if i < chars.len() && chars[i] == '{' {
                while i < chars.len() && chars[i] != '}' {
                    i += 1;
                }
                i += 1;
            } else {
                ident(&mut i);
            }
        } else if c.is_ascii_digit() || c == '.' {
            // A number, or a duration after `offset`.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c == '{' {
            panic!("{expr}: a selector without a metric name (`{{...}}` alone) cannot be checked");
        } else if ident_start(c) {
            let word = ident(&mut i);
            let mut after = i;
            skip_space(&mut after);
            let next = chars.get(after).copied();
            if GROUPINGS.contains(&word.as_str()) {
                if next == Some('(') {
                    let close = chars[after..]
                        .iter()
                        .position(|&c| c == ')')
                        .unwrap_or_else(|| panic!("{expr}: unclosed {word} ("));
                    let list: String = chars[after + 1..after + close].iter().collect();
                    refs.grouping.extend(
                        list.split(',')
                            .map(str::trim)
                            .filter(|l| !l.is_empty())
                            .map(str::to_owned),
                    );
                    i = after + close + 1;
                }
            } else if KEYWORDS.contains(&word.as_str()) {
            } else if next == Some('(') || FUNCTIONS.contains(&word.as_str()) {
                // A function call, or an aggregation followed by `by (...)` or `without (...)`.
                refs.functions.push(word);
            } else {
                let mut matchers = Vec::new();
                if next == Some('{') {
                    i = after + 1;
                    loop {
                        skip_space(&mut i);
                        match chars.get(i) {
                            Some('}') => {
                                i += 1;
                                break;
                            }
                            Some(',') => i += 1,
                            Some(&c) if ident_start(c) => {
                                let label = ident(&mut i);
                                skip_space(&mut i);
                                while i < chars.len() && "=!~".contains(chars[i]) {
                                    i += 1;
                                }
                                skip_space(&mut i);
                                assert!(
                                    i < chars.len() && "\"'`".contains(chars[i]),
                                    "{expr}: label {label} without a quoted value"
                                );
                                matchers.push((label, string(&mut i)));
                            }
                            other => {
                                panic!("{expr}: unexpected {other:?} in the selector of {word}")
                            }
                        }
                    }
                }
                refs.series.push((word, matchers));
            }
        } else {
            panic!("{expr}: unexpected {c:?}");
        }
    }
    refs
}

/// Every name in `expr` is an exported series with its labels, or a known function; grouping labels are
/// labels of its series. Returns the series names.
pub(crate) fn check_expr(origin: &str, expr: &str) -> BTreeSet<String> {
    let refs = refs(expr);
    assert!(!refs.series.is_empty(), "{origin}: `{expr}` uses no metric");
    for function in &refs.functions {
        assert!(
            FUNCTIONS.contains(&function.as_str()),
            "{origin}: `{expr}`: unknown function {function}"
        );
    }
    let mut all_labels = BTreeSet::new();
    for (series, matchers) in &refs.series {
        let labels = series_labels(series).unwrap_or_else(|| {
            panic!("{origin}: `{expr}`: {series} is not a series the operator exports")
        });
        for (label, _) in matchers {
            assert!(
                labels.contains(label.as_str()),
                "{origin}: `{expr}`: {series} has no label {label} (it has {labels:?})"
            );
        }
        all_labels.extend(labels);
    }
    for label in &refs.grouping {
        assert!(
            all_labels.contains(label.as_str()),
            "{origin}: `{expr}`: groups by {label}, a label none of its metrics has"
        );
    }
    refs.series.into_iter().map(|(name, _)| name).collect()
}
