//! [`Name`]: the cheap, shareable name of a guard instance.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Mutex;

use once_cell::sync::Lazy;

/// The name of a guard instance (`"orders"`): free to clone, compares with `&str` and `String`.
///
/// Names are interned: each distinct name is stored once, for the life of the process, and a
/// `Name` is a reference to it. Cloning one is a copy, with no reference count to update, so a
/// refusal that carries its guard's name ([`Rejected`](crate::Rejected)) costs no atomic
/// operation. Names identify guard instances, which a [`Registry`](crate::Registry) keeps for
/// its own life too: name them by dependency (`"payments"`), not by request.
///
/// ```
/// use resilience_runtime::Name;
///
/// let name = Name::from("orders");
/// assert_eq!(name, "orders");
/// assert_eq!(name.as_str().len(), 6);
/// assert_eq!(name, Name::from(String::from("orders")));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(&'static str);

/// Every name made so far. A mutex and a set are all this needs: names are made when guards are
/// configured or created, never on the path of a call (an interning crate's arenas and
/// precomputed hashes would serve lookups this never does).
static NAMES: Lazy<Mutex<HashSet<&'static str>>> = Lazy::new(Mutex::default);

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        self.0
    }

    /// The name, borrowed for the life of the process (names are interned, never freed).
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    pub(crate) fn as_static(&self) -> &'static str {
        self.0
    }

    /// Whether `s` was ever made a `Name` in this process.
    #[cfg(test)]
    pub(crate) fn is_interned(s: &str) -> bool {
        NAMES.lock().unwrap_or_else(|p| p.into_inner()).contains(s)
    }

    fn intern(s: &str) -> Self {
        // A panic while the set is locked cannot leave it half-updated (`insert` of a leaked
        // string), so a poisoned lock is used as it is.
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&found) = names.get(s) {
            return Name(found);
        }
        let leaked: &'static str = Box::leak(Box::from(s));
        names.insert(leaked);
        Name(leaked)
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

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name::intern(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name::intern(&s)
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Name::intern(s)
    }
}

impl From<&Name> for Name {
    fn from(s: &Name) -> Self {
        s.clone()
    }
}

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

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_stored_once_however_often_it_is_made() {
        let made = format!("name-{}", line!());
        let a = Name::from(made.as_str());
        let b = Name::from(made.clone());
        let c = a.clone();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert!(std::ptr::eq(a.as_str(), c.as_str()));
        assert_eq!(a, made);
        assert_ne!(a, Name::from("another name"));
    }

    #[test]
    fn names_order_and_hash_as_their_strings() {
        use std::collections::HashMap;
        let mut map = HashMap::new();
        map.insert(Name::from("b"), 2);
        map.insert(Name::from("a"), 1);
        assert_eq!(map.get("a"), Some(&1));
        let mut names: Vec<Name> = map.into_keys().collect();
        names.sort();
        assert_eq!(names, ["a", "b"]);
    }
}
