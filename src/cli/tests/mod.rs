//! The command layer's tests that need the library's internals.

mod list_defaults;
