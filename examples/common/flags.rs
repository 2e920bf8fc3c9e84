//! The examples' numeric command-line flags: `--name <positive number>`.

/// The value of `flag` in `args`, or `default` when it is absent.
///
/// # Errors
///
/// A message naming the flag and showing a valid use when its value is missing, not a number,
/// or zero.
pub fn positive(args: &[String], flag: &str, default: usize) -> Result<usize, String> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("`{flag}` needs a positive number, e.g. `{flag} {default}`")),
    }
}
