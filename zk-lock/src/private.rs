//! Support for the code the attributes generate. Not public API: no semver promises.
