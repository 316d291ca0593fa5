//! Breaker names, interned for the life of the process.
//!
//! A refusal carries its breaker's name. Holding it as `&'static str` keeps
//! the refusal path free of reference-count traffic: no atomic increment on a
//! cache line that every refusing thread shares. Each distinct name is stored
//! once, however many breakers are built with it, so building breakers
//! repeatedly (which is a mistake, but a possible one) does not grow memory.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

/// A name as a thin pointer: one word, so a refusal stays two words.
pub(crate) type Name = &'static &'static str;

static NAMES: OnceLock<Mutex<HashMap<&'static str, Name>>> = OnceLock::new();

/// The process-wide copy of `name`.
pub(crate) fn intern(name: &str) -> Name {
    let mut names = NAMES.get_or_init(Default::default).lock();
    if let Some(&stored) = names.get(name) {
        return stored;
    }
    let text: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let stored: Name = Box::leak(Box::new(text));
    names.insert(text, stored);
    stored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_is_stored_once() {
        let a = intern("refdata-intern-test");
        let b = intern(&String::from("refdata-intern-test"));
        assert_eq!(*a, "refdata-intern-test");
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, intern("other-intern-test")));
    }
}
