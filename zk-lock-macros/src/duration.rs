//! `timeout = "1m30s"`: durations written as numbers with units, largest unit first.

use std::time::Duration;

/// The units a duration may use, largest first, with their length in nanoseconds.
const UNITS: [(&str, u128); 6] = [
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// The list of units, as shown in messages.
const UNIT_LIST: &str = "`h`, `m`, `s`, `ms`, `us`, `ns`";

/// Parses `text` (`"5s"`, `"250ms"`, `"1m30s"`, `"0s"`): one or more whole numbers, each
/// followed by a unit, with units from largest to smallest and each at most once.
///
/// The error is a complete message about `<key> = "<text>"`.
pub(crate) fn parse(key: &str, text: &str) -> Result<Duration, String> {
    let shown = format!("`{key} = {text:?}`");
    if text.trim().is_empty() {
        return Err(format!(
            "{shown} is empty; write a number with a unit, like \"5s\", \"250ms\" or \"1m30s\" (units: {UNIT_LIST})"
        ));
    }
    let mut nanos: u128 = 0;
    let mut rest = text;
    // Index in UNITS of the last unit used: the next one must be smaller.
    let mut last_unit: Option<usize> = None;
    while !rest.is_empty() {
        let digits_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits_len == 0 {
            return Err(match rest.chars().next() {
                Some('-') => format!("{shown} is negative; a duration is zero or more, like \"0s\" or \"5s\""),
                Some(c) if c.is_whitespace() => {
                    format!("{shown} contains spaces; write numbers and units together, like \"1m30s\"")
                }
                _ => format!("{shown} must start with a number, like \"5s\", \"250ms\" or \"1m30s\""),
            });
        }
        let (digits, after) = rest.split_at(digits_len);
        let unit_len = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!(
                "{shown} has no unit after `{digits}`; write \"{digits}s\" for seconds or \"{digits}ms\" for milliseconds (units: {UNIT_LIST})"
            ));
        }
        if unit.starts_with('.') || unit.starts_with(',') {
            return Err(format!(
                "{shown} has a fraction; write whole numbers of a smaller unit instead, like \"1s500ms\" for one and a half seconds"
            ));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit.trim()) else {
            let unknown = unit.trim();
            let suggestion = match spelled_out(unknown) {
                Some(short) => format!("; did you mean \"{digits}{short}\"?"),
                None => String::new(),
            };
            return Err(format!("{shown} has the unknown unit `{unknown}`; expected one of {UNIT_LIST}{suggestion}"));
        };
        if unit.trim() != unit {
            return Err(format!("{shown} contains spaces; write numbers and units together, like \"1m30s\""));
        }
        if last_unit.is_some_and(|last| index <= last) {
            return Err(format!(
                "{shown} must give its units from largest to smallest, each once, like \"1m30s\" or \"2s500ms\""
            ));
        }
        last_unit = Some(index);
        let too_large = || format!("{shown} is too large; keep it below a few hundred years");
        let value: u128 = digits.parse().map_err(|_| too_large())?;
        nanos = value.checked_mul(UNITS[index].1).and_then(|n| nanos.checked_add(n)).ok_or_else(too_large)?;
        rest = after;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| format!("{shown} is too large"))?;
    let subsec = u32::try_from(nanos % 1_000_000_000).expect("below one second");
    Ok(Duration::new(secs, subsec))
}

/// The unit a spelled-out (or otherwise common) unit name stands for: `secs` is `s`.
fn spelled_out(unit: &str) -> Option<&'static str> {
    let unit = unit.to_ascii_lowercase();
    // Plurals and the `s` of `secs`, `mins`, `millis` go first: what is left names the unit.
    let short = match unit.trim_end_matches('s') {
        "hour" | "hr" | "h" => "h",
        "minute" | "min" | "m" => "m",
        "second" | "sec" | "" => "s",
        "millisecond" | "milli" | "msec" => "ms",
        "microsecond" | "micro" | "usec" | "µ" => "us",
        "nanosecond" | "nano" | "nsec" => "ns",
        _ => return None,
    };
    Some(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse("timeout", text).unwrap_or_else(|e| panic!("{text:?} rejected: {e}"))
    }

    fn err(text: &str) -> String {
        match parse("timeout", text) {
            Ok(d) => panic!("{text:?} accepted as {d:?}"),
            Err(message) => {
                assert!(message.contains(&format!("`timeout = {text:?}`")), "{message}");
                message
            }
        }
    }

    #[test]
    fn accepts_numbers_with_units_largest_first() {
        assert_eq!(ok("5s"), Duration::from_secs(5));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("0ms"), Duration::ZERO);
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("1h2m3s4ms5us6ns"), Duration::new(3723, 4_005_006));
        assert_eq!(ok("1500ms"), Duration::from_millis(1500));
        assert_eq!(ok("90s"), Duration::from_secs(90));
    }

    #[test]
    fn explains_what_is_wrong() {
        assert!(err("5").contains("no unit after `5`"));
        assert!(err("5").contains("\"5s\""));
        assert!(err("5 parsecs").contains("unknown unit `parsecs`"));
        assert!(err("5 s").contains("spaces"));
        assert!(err("5x").contains("unknown unit `x`"));
        assert!(!err("5x").contains("did you mean"));
        assert!(err("5secs").contains("did you mean \"5s\"?"), "{}", err("5secs"));
        assert!(err("5 secs").contains("spaces") || err("5 secs").contains("did you mean \"5s\"?"));
        assert!(err("2min").contains("did you mean \"2m\"?"));
        assert!(err("250millis").contains("did you mean \"250ms\"?"));
        assert!(err("3Hours").contains("did you mean \"3h\"?"));
        assert!(err("1s1m").contains("largest to smallest"));
        assert!(err("1s2s").contains("largest to smallest"));
        assert!(err("1.5s").contains("fraction"));
        assert!(err("-1s").contains("negative"));
        assert!(err("s").contains("must start with a number"));
        assert!(err(" 5s").contains("spaces"));
        assert!(err("").contains("empty"));
        assert!(err("99999999999999999999999999999999999999999h").contains("too large"));
        assert!(err("9999999999999999999h").contains("too large"));
    }

    #[test]
    fn every_message_lists_units_when_the_unit_is_the_problem() {
        for text in ["5", "5 parsecs", "5x", ""] {
            assert!(err(text).contains(UNIT_LIST), "{text:?}");
        }
    }
}
