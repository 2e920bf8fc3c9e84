//! Command-line flags of the stock demos: `--flag value` pairs and switches, with errors that
//! name the flag, the value and what is allowed.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

/// The parsed command line: values of the flags that take one, and the switches present.
pub struct Flags {
    values: HashMap<&'static str, String>,
    switches: Vec<&'static str>,
}

impl Flags {
    /// Parses `args` (without the program name). `valued` flags take the next argument as their
    /// value; `switches` take none. Anything else is an error.
    pub fn parse(
        args: impl IntoIterator<Item = String>,
        valued: &[&'static str],
        switches: &[&'static str],
    ) -> Result<Flags, String> {
        let mut flags = Flags { values: HashMap::new(), switches: Vec::new() };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if let Some(&flag) = valued.iter().find(|&&f| f == arg) {
                let value = args.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
                flags.values.insert(flag, value);
            } else if let Some(&switch) = switches.iter().find(|&&s| s == arg) {
                flags.switches.push(switch);
            } else {
                return Err(format!("unknown argument `{arg}`; `--help` lists the options"));
            }
        }
        Ok(flags)
    }

    /// The value of `flag`, if given.
    pub fn get(&self, flag: &str) -> Option<&str> {
        self.values.get(flag).map(String::as_str)
    }

    /// Whether the switch `flag` was given.
    pub fn has(&self, flag: &str) -> bool {
        self.switches.contains(&flag)
    }

    /// A number greater than zero, or `default` when the flag is absent.
    pub fn positive<T>(&self, flag: &str, default: T) -> Result<T, String>
    where
        T: FromStr + PartialOrd + From<u8> + std::fmt::Display,
    {
        match self.get(flag) {
            None => Ok(default),
            Some(value) => value
                .parse()
                .ok()
                .filter(|n| *n > T::from(0))
                .ok_or_else(|| format!("`{flag} {value}`: needs a whole number above 0, e.g. `{flag} {default}`")),
        }
    }

    /// A duration written `<n>ms` or `<n>s` (`0ms` allowed), or `default` when absent.
    pub fn duration(&self, flag: &str, default: Duration) -> Result<Duration, String> {
        let Some(value) = self.get(flag) else { return Ok(default) };
        let parsed = match value.strip_suffix("ms") {
            Some(ms) => ms.parse().ok().map(Duration::from_millis),
            None => value.strip_suffix('s').and_then(|s| s.parse().ok()).map(Duration::from_secs),
        };
        parsed.ok_or_else(|| {
            format!("`{flag} {value}`: needs a duration in whole milliseconds or seconds, e.g. `20ms` or `1s`")
        })
    }
}

/// Formats a duration as the `duration` flags read it back.
pub fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}
