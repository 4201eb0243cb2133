//! Durations as the attribute writes them: `"500ms"`, `"30s"`, `"5m"`, `"1h30m"`, `"2d"`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
