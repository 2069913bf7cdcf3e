//! How names are matched: exactly, or folded the way case-insensitive file systems match them.
//!
//! A file system that folds names (APFS and HFS+ by default, NTFS, vfat and exFAT, SMB shares, ext4 and
//! f2fs directories with casefold on, many FUSE file systems) finds the entry `.env` when asked for
//! `.ENV`, and on APFS and ext4 also `café` written in either Unicode form. So a name is never compared
//! as a tool spelled it: the resolver learns the name the file system stores (`crate::lower`), and
//! where a name is held to a rule that must hold in every spelling (a deny glob, turngate's state
//! directory), the rule is held to the folded name as well.
//!
//! [`fold`] is that folded form: the name in Unicode canonical composition (NFC) with every character
//! lowercased. It is a superset of what the file systems above treat as one name for case and canonical
//! equivalence; aliases some make beyond that (full case folding's `ß` = `ss` on ext4, NTFS's own
//! upcase table, 8.3 short names) are not folded here (docs/policy.md lists them).

use std::borrow::Cow;

use unicode_normalization::{UnicodeNormalization, is_nfc};

/// How the directories on a path match the names looked up in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum NameMatch {
    /// Each name is itself only (what is known of a directory until a lookup shows it folds).
    #[default]
    Exact,
    /// A name also matches what differs from it only in case or Unicode normalization.
    Folding,
}

impl NameMatch {
    /// The looser of two: folding if either folds (a path folds where any directory on it does).
    pub fn or(self, other: NameMatch) -> NameMatch {
        if self == NameMatch::Folding || other == NameMatch::Folding {
            NameMatch::Folding
        } else {
            NameMatch::Exact
        }
    }

    /// Whether `a` and `b` name the same entry in a directory matching names this way.
    pub fn same(self, a: &str, b: &str) -> bool {
        a == b || (self == NameMatch::Folding && fold(a) == fold(b))
    }
}

/// The folded form of `text` (a name or a whole path): NFC, every character lowercased. Borrowed when
/// `text` is already folded (plain lowercase ASCII needs no work).
pub fn fold(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    // Decompose first so a capital with an accent lowercases as its parts, then compose again.
    let lowered: String = text.nfd().flat_map(char::to_lowercase).collect();
    if is_nfc(&lowered) && lowered == text {
        return Cow::Borrowed(text);
    }
    Cow::Owned(lowered.nfc().collect())
}

/// Whether `name` has a character with another case (so another spelling a directory may fold to it).
pub(crate) fn has_case(name: &str) -> bool {
    if name.is_ascii() {
        return name.bytes().any(|b| b.is_ascii_alphabetic());
    }
    name.chars().any(|c| c.is_lowercase() || c.is_uppercase())
}

/// Whether `name` may have another Unicode normalization form (only a name with characters outside
/// ASCII can).
pub(crate) fn has_forms(name: &str) -> bool {
    !name.is_ascii()
}

/// Another spelling of `name` differing only in case (every cased character flipped), if it has one:
/// looking it up tells whether a directory folds case.
pub(crate) fn case_variant(name: &str) -> Option<String> {
    let mut changed = false;
    let variant: String = name
        .chars()
        .flat_map(|c| {
            let flipped: Vec<char> = if c.is_lowercase() {
                c.to_uppercase().collect()
            } else if c.is_uppercase() {
                c.to_lowercase().collect()
            } else {
                vec![c]
            };
            if flipped != [c] {
                changed = true;
            }
            flipped
        })
        .collect();
    changed.then_some(variant)
}

/// Another spelling of `name` differing only in Unicode normalization (its NFC form, or where it is
/// already NFC its NFD form), if it has one: looking it up tells whether a directory folds forms.
pub(crate) fn form_variant(name: &str) -> Option<String> {
    if name.is_ascii() {
        return None;
    }
    let composed: String = name.nfc().collect();
    if composed != name {
        return Some(composed);
    }
    let decomposed: String = name.nfd().collect();
    (decomposed != name).then_some(decomposed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_joins_case_and_unicode_forms() {
        assert_eq!(fold(".ENV"), ".env");
        assert!(matches!(fold("notes.txt"), Cow::Borrowed(_)));
        let nfc = "caf\u{e9}.txt";
        let nfd = "cafe\u{301}.txt";
        assert_eq!(fold(nfc), fold(nfd));
        assert_eq!(fold("CAF\u{c9}.TXT"), fold(nfd));
        assert!(NameMatch::Folding.same("SECRETS", "secrets"));
        assert!(!NameMatch::Exact.same("SECRETS", "secrets"));
    }

    #[test]
    fn variants_differ_only_where_a_folding_file_system_would_not_tell() {
        assert_eq!(case_variant("a.Txt").as_deref(), Some("A.tXT"));
        assert_eq!(case_variant("123_-"), None);
        assert_eq!(form_variant("notes"), None);
        assert_eq!(
            form_variant("caf\u{e9}").as_deref(),
            Some("cafe\u{301}"),
            "NFC gets its NFD"
        );
        assert_eq!(form_variant("cafe\u{301}").as_deref(), Some("caf\u{e9}"));
    }
}
