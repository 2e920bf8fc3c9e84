//! Whether lock-order checking is on: by default in debug builds of zk-lock, otherwise as the
//! environment ([`LOCK_ORDER_ENV`]) or the program ([`set_lock_order_checking`]) says. Off, it
//! costs an atomic load per acquisition.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::trace::TARGET;

/// The environment variable that turns lock-order checking on (`1`, `true`, `on`) or off (`0`,
/// `false`, `off`), read when the process first acquires a lock. Without it, checking is on in
/// debug builds (`debug_assertions`) of zk-lock and off in release builds.
/// [`set_lock_order_checking`] overrides it.
pub const LOCK_ORDER_ENV: &str = "ZK_LOCK_ORDER";

const UNDECIDED: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static CHECKING: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Turns lock-order checking on or off for the whole process, whatever the build and
/// [`LOCK_ORDER_ENV`] say. Turned on, it records from then on: locks held before are not known
/// as held. Turned off, it records nothing more; [`lock_order()`](super::lock_order()) keeps
/// what was recorded.
pub fn set_lock_order_checking(on: bool) {
    CHECKING.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether lock-order checking is on (see [`set_lock_order_checking`] and [`LOCK_ORDER_ENV`]).
#[inline]
pub fn lock_order_checking() -> bool {
    match CHECKING.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => decide(),
    }
}

/// The first look: the environment, or the build. A `set_lock_order_checking` meanwhile wins.
#[cold]
fn decide() -> bool {
    let value = std::env::var_os(LOCK_ORDER_ENV);
    let on = value.as_deref().and_then(parse).unwrap_or(cfg!(debug_assertions));
    let _ = CHECKING.compare_exchange(UNDECIDED, if on { ON } else { OFF }, Ordering::Relaxed, Ordering::Relaxed);
    CHECKING.load(Ordering::Relaxed) == ON
}

/// The setting of [`LOCK_ORDER_ENV`]; `None` (the build's default) for an empty or invalid value,
/// which is reported.
fn parse(value: &std::ffi::OsStr) -> Option<bool> {
    let text = value.to_string_lossy();
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" => Some(true),
        "0" | "false" | "off" => Some(false),
        "" => None,
        _ => {
            tracing::warn!(
                target: TARGET,
                value = %text,
                checking = cfg!(debug_assertions),
                "ignored an invalid ZK_LOCK_ORDER (it takes 1, true, on, 0, false or off)"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_says_on_or_off_and_anything_else_keeps_the_build_default() {
        for on in ["1", "true", "ON", " on "] {
            assert_eq!(parse(on.as_ref()), Some(true), "{on:?}");
        }
        for off in ["0", "false", "Off"] {
            assert_eq!(parse(off.as_ref()), Some(false), "{off:?}");
        }
        for neither in ["", "yes please", "2"] {
            assert_eq!(parse(neither.as_ref()), None, "{neither:?}");
        }
    }
}
