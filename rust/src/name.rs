//! Interned names of meshes and mesh axes.
//!
//! A [`Name`] is a `&'static str` taken from one process-wide table, so each distinct spelling
//! is stored once: copying a name copies a pointer, and two names are equal exactly when they
//! point at the same text. Shardings hold their mesh and axis names this way, which makes
//! cloning and comparing them (the propagation solver's most frequent work) free of string
//! allocation and byte comparison.
//!
//! The table only grows: a program names a handful of meshes and axes, and a process that reads
//! many programs keeps one entry per distinct spelling it has seen.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Mutex, OnceLock};

/// An interned name (see the module documentation). Orders and hashes as its text.
#[derive(Clone, Copy)]
pub struct Name(&'static str);

fn table() -> &'static Mutex<HashSet<&'static str>> {
    static TABLE: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashSet::new()))
}

impl Name {
    /// The interned name spelled `text`.
    pub fn new(text: &str) -> Name {
        // The table is only ever inserted into, so a poisoned lock still holds a valid set.
        let mut set = table().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&s) = set.get(text) {
            return Name(s);
        }
        let s: &'static str = Box::leak(text.to_owned().into_boxed_str());
        set.insert(s);
        Name(s)
    }

    /// The text.
    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        // Interned: equal text is the same pointer.
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.0 == other.as_str()
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.0
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that maps keyed by `Name` can be looked up with a `&str`.
        self.0.hash(state);
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        if self == other {
            Ordering::Equal
        } else {
            self.0.cmp(other.0)
        }
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text)
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Name {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name::new(&text)
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_text_is_one_name() {
        let a = Name::new("data");
        let b = Name::from(String::from("data"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_ne!(a, Name::new("model"));
        assert_eq!(a, "data");
    }

    #[test]
    fn orders_and_hashes_as_text() {
        let mut names = vec![Name::new("z"), Name::new("a"), Name::new("m")];
        names.sort();
        assert_eq!(names.iter().map(|n| n.as_str()).collect::<Vec<_>>(), ["a", "m", "z"]);
        let set: HashSet<Name> = names.into_iter().collect();
        assert!(set.contains("m"));
        assert_eq!(format!("{:?} {}", Name::new("x"), Name::new("x")), "\"x\" x");
    }
}
