//! `timeout = "1m30s"`: durations in humantime's syntax, the one `zk-lock --timeout` takes too.
//!
//! [`humantime::parse_duration`] decides what is a duration, so the attributes and the CLI accept
//! the same strings (both use the workspace's humantime). This module only explains a refusal:
//! what is wrong, and what was probably meant.

use std::time::Duration;

use humantime::DurationError;

/// The units, as shown in messages: the short ones first, largest first, then the others. A
/// test checks each against humantime and [`UNITS`].
const UNIT_LIST: &str =
    "`h`, `m`, `s`, `ms`, `us`, `ns`; also `d`, `w`, `M` for months, `y`, and names like `sec`, `min`, `hours`";

/// The examples shown in messages.
const EXAMPLES: &str = "like \"5s\", \"250ms\", \"1.5s\" or \"1m 30s\"";

/// Parses `text` (`"5s"`, `"250ms"`, `"1.5s"`, `"1m30s"`, `"1m 30s"`, `"0s"`) as
/// [`humantime::parse_duration`] does: numbers, each followed by a unit, summed.
///
/// The error is a complete message about `<key> = "<text>"`.
pub(crate) fn parse(key: &str, text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|error| explain(&format!("`{key} = {text:?}`"), text, &error))
}

/// Says what is wrong with `text`, which humantime refused with `error`; `shown` is the
/// argument as written.
fn explain(shown: &str, text: &str, error: &DurationError) -> String {
    // What humantime stopped at (from the offset it gives, spaces skipped), and what precedes it.
    let from = |offset: usize| text.get(offset..).unwrap_or_default().trim_start();
    let before = |offset: usize| text.get(..offset).unwrap_or_default().trim();
    let at = |offset: usize| from(offset).chars().next();
    match error {
        DurationError::Empty => {
            format!("{shown} is empty; write a number with a unit, {EXAMPLES} (units: {UNIT_LIST})")
        }
        DurationError::UnknownUnit { start, unit, .. } if unit.is_empty() => {
            // Only at the end: a number is cut short by anything else.
            let before = text[..*start].trim_end();
            let number = &before[before.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.').len()..];
            format!(
                "{shown} has no unit after `{number}`; write \"{number}s\" for seconds or \"{number}ms\" for milliseconds (units: {UNIT_LIST})"
            )
        }
        DurationError::UnknownUnit { unit, .. } => {
            let suggestion = corrected(text).map(|fixed| format!("; did you mean {fixed:?}?")).unwrap_or_default();
            format!("{shown} has the unknown unit `{unit}`; expected one of {UNIT_LIST}{suggestion}")
        }
        DurationError::NumberExpected(offset) => match at(*offset) {
            Some('-') if from(*offset)[1..].starts_with(|c: char| c.is_ascii_digit()) => {
                format!("{shown} is negative; a duration is zero or more, like \"0s\" or \"5s\"")
            }
            Some('.') if before(*offset).is_empty() => {
                format!("{shown} must start with a digit; write \"0.5s\" rather than \".5s\"")
            }
            _ if before(*offset).is_empty() => format!("{shown} must start with a number, {EXAMPLES}"),
            Some(c) => {
                let word: String = from(*offset).chars().take_while(|c| !c.is_whitespace()).collect();
                let what = if c.is_alphabetic() { format!("the unit `{word}`") } else { format!("`{c}`") };
                format!("{shown} has {what} without a number before it; give each unit its number, like \"1h 30m\"")
            }
            None => format!("{shown} must start with a number, {EXAMPLES}"),
        },
        DurationError::InvalidCharacter(offset) => match at(*offset) {
            Some('.') if before(*offset).ends_with(char::is_alphabetic) => {
                format!("{shown} has a `.` after a unit; a decimal point goes inside a number, like \"1.5s\"")
            }
            Some('.') if !from(*offset)[1..].trim_start().starts_with(|c: char| c.is_ascii_digit()) => {
                format!("{shown} has a `.` without digits after it; write \"1.5s\" or \"1s\"")
            }
            Some('.') => format!("{shown} has a number with two `.`; write one decimal point, like \"1.5s\""),
            Some(',') => {
                let comma = text.len() - from(*offset).len();
                let decimal = before(*offset).ends_with(|c: char| c.is_ascii_digit())
                    && text[comma + 1..].starts_with(|c: char| c.is_ascii_digit());
                let (problem, fixed) = if decimal {
                    ("a decimal comma; a fraction takes a point", format!("{}.{}", &text[..comma], &text[comma + 1..]))
                } else {
                    ("`,`; separate the parts with spaces or nothing", text.replace(',', ""))
                };
                let suggestion = match humantime::parse_duration(&fixed) {
                    Ok(_) => format!("; did you mean {fixed:?}?"),
                    Err(_) => format!(", {EXAMPLES}"),
                };
                format!("{shown} has {problem}{suggestion}")
            }
            Some('μ') => format!(
                "{shown} has the Greek letter `μ`; write microseconds as `us` (or with the micro sign `µ`, U+00B5)"
            ),
            Some(c) => format!(
                "{shown} has `{c}`, which a duration cannot contain; write numbers with units, {EXAMPLES}, separated by spaces or not"
            ),
            None => format!("{shown} is not a duration; write a number with a unit, {EXAMPLES}"),
        },
        DurationError::NumberOverflow if text.contains('.') => format!(
            "{shown} is finer than a nanosecond or too large; a duration is whole nanoseconds, below a few hundred years"
        ),
        DurationError::NumberOverflow => format!("{shown} is too large; keep it below a few hundred years"),
    }
}

/// `text` with each unknown unit replaced by the unit it most likely means (`"5 Secs"` is
/// `"5 s"`), if that makes a duration.
fn corrected(text: &str) -> Option<String> {
    let mut fixed = text.to_owned();
    // Each round fixes one unit; a duration has a handful.
    for _ in 0..16 {
        match humantime::parse_duration(&fixed) {
            Ok(_) => return Some(fixed),
            Err(DurationError::UnknownUnit { start, end, unit, .. }) if !unit.is_empty() => {
                fixed.replace_range(start..end, meant(&unit)?);
            }
            Err(_) => return None,
        }
    }
    None
}

/// The units a suggestion names, smallest first: the short name it writes and the unit in
/// words. Not humantime's grammar, which decides what parses and knows more spellings (`secs`,
/// `hr`, `wk`, `msec`...): only what a hint needs that humantime cannot say, which name to
/// suggest for a unit (humantime reads `"1h"` and `"1hour"` alike) and the words a misspelt or
/// unsupported name (`minuts`, `milliseconds`) is compared with. A test checks that humantime
/// reads each short name as its word, and as no other unit.
const UNITS: [(&str, &str); 10] = [
    ("ns", "nanosecond"),
    ("us", "microsecond"),
    ("ms", "millisecond"),
    ("s", "second"),
    ("m", "minute"),
    ("h", "hour"),
    ("d", "day"),
    ("w", "week"),
    ("M", "month"),
    ("y", "year"),
];

/// The short unit an unknown unit most likely means: a unit humantime knows in another case or
/// number (`Secs`, `MS`, `hrss`), a name it lacks (`milliseconds`, `micros`), or a misspelt
/// one (`minuts`).
fn meant(unit: &str) -> Option<&'static str> {
    // The micro sign as `u`, which humantime takes wherever it takes `µ` (`µs`, `us`; `usec`).
    let lower = unit.to_lowercase().replace('µ', "u");
    let singular = lower.strip_suffix('s').unwrap_or(&lower);
    if let Some(short) = [lower.as_str(), singular].into_iter().find_map(same_unit) {
        return Some(short);
    }
    // A one-letter unit is one edit from every other: only words are guessed at. One that starts
    // a unit's name (`milli`, `nano`) means that unit; else the name a few edits away, if any.
    if singular.chars().count() < 4 {
        return None;
    }
    let words = UNITS.map(|(_, word)| word);
    let word = words
        .iter()
        .find(|word| word.starts_with(singular))
        .copied()
        .or_else(|| crate::args::closest(singular, &words))?;
    UNITS.iter().find(|(_, name)| *name == word).map(|(short, _)| *short)
}

/// The short name of the unit `word` is to humantime (`secs` is `s`), if it is one of its units.
fn same_unit(word: &str) -> Option<&'static str> {
    // A word only, so that `1` and the word read as one number with its unit.
    if word.is_empty() || !word.chars().all(char::is_alphabetic) {
        return None;
    }
    let one = |unit: &str| humantime::parse_duration(&format!("1{unit}")).ok();
    let length = one(word)?;
    UNITS.iter().find(|(short, _)| one(short) == Some(length)).map(|(short, _)| *short)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings and what they mean, or `None` for a refusal.
    const CASES: &[(&str, Option<Duration>)] = include!("duration_cases.rs");

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
    fn accepts_what_the_cli_accepts() {
        for (text, expected) in CASES {
            match expected {
                Some(duration) => assert_eq!(ok(text), *duration, "{text:?}"),
                None => {
                    err(text);
                }
            }
            assert_eq!(humantime::parse_duration(text).ok(), *expected, "{text:?}");
        }
    }

    #[test]
    fn accepts_humantimes_syntax() {
        assert_eq!(ok("5s"), Duration::from_secs(5));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1m 30s"), Duration::from_secs(90));
        assert_eq!(ok("1h2m3s4ms5us6ns"), Duration::new(3723, 4_005_006));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("5 secs"), Duration::from_secs(5));
        assert_eq!(ok("2 hours 37 min"), Duration::from_secs(9420));
    }

    #[test]
    fn explains_what_is_wrong() {
        assert!(err("5").contains("no unit after `5`"));
        assert!(err("5").contains("\"5s\""));
        assert!(err("1m 1.5").contains("no unit after `1.5`; write \"1.5s\""), "{}", err("1m 1.5"));
        assert!(err("5 parsecs").contains("unknown unit `parsecs`"));
        assert!(!err("5 parsecs").contains("did you mean"));
        assert!(err("5x").contains("unknown unit `x`"));
        assert!(!err("5x").contains("did you mean"));
        assert!(err("1.5.3s").contains("two `.`"), "{}", err("1.5.3s"));
        assert!(err("5s.5").contains("`.` after a unit"), "{}", err("5s.5"));
        assert!(err("1,5s").contains("decimal comma; a fraction takes a point; did you mean \"1.5s\"?"));
        assert!(err("1m, 30s").contains("has `,`; separate the parts with spaces or nothing; did you mean \"1m 30s\"?"));
        assert!(err("1m,").contains("has `,`; separate the parts with spaces or nothing; did you mean \"1m\"?"));
        assert!(err("1,5,3s").ends_with("a point, like \"5s\", \"250ms\", \"1.5s\" or \"1m 30s\""));
        assert!(err("1:30").contains("has `:`, which"));
        assert!(err("1.s").contains("`.` without digits after it"));
        assert!(err("1.").contains("`.` without digits after it"));
        assert!(err(".5s").contains("\"0.5s\""));
        assert!(err("5μs").contains("`us`"));
        assert!(err("-1s").contains("negative"));
        assert!(err("1h -").contains("has `-` without a number before it"), "{}", err("1h -"));
        assert!(err("s").contains("must start with a number"));
        assert!(err(" +5s").contains("must start with a number"));
        assert!(err("1h min").contains("the unit `min` without a number before it"), "{}", err("1h min"));
        assert!(err("").contains("empty"));
        assert!(err("  ").contains("empty"));
        assert!(err("99999999999999999999999999999999999999999h").contains("too large"));
        assert!(err("9999999999999999999h").contains("too large"));
        assert!(err("0.5ns").contains("finer than a nanosecond"));
    }

    #[test]
    fn suggests_the_unit_meant() {
        for (text, meant) in [
            ("5Secs", "5s"),
            ("5 Secs", "5 s"),
            ("3Hours", "3h"),
            ("5MS", "5ms"),
            ("5S", "5s"),
            ("250milliseconds", "250ms"),
            ("250 millisecond", "250 ms"),
            ("10micros", "10us"),
            ("10 nanoseconds", "10 ns"),
            ("2minuts", "2m"),
            ("1Hour 30Min", "1h 30m"),
            ("1m 30 Secs", "1m 30 s"),
        ] {
            let message = err(text);
            assert!(message.contains(&format!("did you mean {meant:?}?")), "{text:?}: {message}");
        }
        // Only a suggestion that parses is made.
        assert!(!err("3Hours x").contains("did you mean"), "{}", err("3Hours x"));
        assert!(!err("5 sex").contains("did you mean"), "{}", err("5 sex"));
    }

    #[test]
    fn explains_every_refusal_without_panicking() {
        let pieces = ["1", "0", ".", " ", "\u{a0}", "s", "S", "m", "M", "sec", "Secs", "x", "-", "+", ",", "μ", "µ"];
        let mut texts = vec![String::new()];
        for _ in 0..4 {
            texts = texts.iter().flat_map(|text| pieces.iter().map(move |piece| format!("{text}{piece}"))).collect();
            for text in &texts {
                if let Err(message) = parse("timeout", text) {
                    assert!(message.starts_with(&format!("`timeout = {text:?}`")), "{message}");
                }
            }
        }
    }

    /// The hints' units are humantime's: each short name is a unit of its own, the one its word
    /// names when humantime knows the word; the message lists each, and humantime takes every
    /// name the message shows.
    #[test]
    fn the_units_of_the_hints_are_humantimes() {
        let one = |unit: &str| humantime::parse_duration(&format!("1{unit}"));
        let mut shorter = Duration::ZERO;
        for (short, word) in UNITS {
            let length = one(short).unwrap_or_else(|e| panic!("{short}: {e}"));
            assert!(length > shorter, "{short}: smallest first, each a unit of its own");
            shorter = length;
            if let Ok(named) = one(word) {
                assert_eq!(named, length, "{word}");
            }
            assert_eq!(same_unit(short), Some(short));
            assert!(UNIT_LIST.contains(&format!("`{short}`")), "{short} missing from the list");
        }
        for name in UNIT_LIST.split('`').skip(1).step_by(2) {
            assert!(one(name).is_ok(), "{name}");
        }
        assert_eq!(same_unit("5s"), None, "a word only");
        assert_eq!(meant("µSecs"), Some("us"));
        assert_eq!(meant("Seco"), Some("s"));
    }

    #[test]
    fn every_message_lists_units_when_the_unit_is_the_problem() {
        for text in ["5", "5 parsecs", "5x", ""] {
            assert!(err(text).contains(UNIT_LIST), "{text:?}");
        }
    }
}
