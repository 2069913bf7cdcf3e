//! Diffs a page of hunks at a time: the console answers the first page of each diff with the number
//! of its hunks, and any later page on request, so a large diff is neither sent nor drawn whole.
//!
//! A hunk starts at a line beginning `@@` and runs to the next one (a later file's `---` and `+++`
//! lines go with the hunk before them); the lines before the first hunk come with the first page.

use serde::Serialize;

/// Hunks on a page.
pub const HUNKS_A_PAGE: usize = 20;

/// A page of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct DiffPage {
    /// The page's lines: the hunks from `from` (with the lines before the first hunk when `from` is 0).
    pub diff: String,
    /// The first hunk on the page.
    pub from: usize,
    /// How many hunks the whole diff has.
    pub hunks: usize,
}

/// The page of `diff` starting at hunk `from` (past the last hunk: an empty page).
pub(super) fn page(diff: &str, from: usize) -> DiffPage {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in diff.split_inclusive('\n') {
        if line.starts_with("@@") {
            starts.push(offset);
        }
        offset += line.len();
    }
    let hunks = starts.len();
    let start = match from {
        0 => 0,
        from => starts.get(from).copied().unwrap_or(diff.len()),
    };
    let end = starts
        .get(from.saturating_add(HUNKS_A_PAGE))
        .copied()
        .unwrap_or(diff.len());
    DiffPage {
        diff: diff[start..end.max(start)].to_owned(),
        from,
        hunks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_on_exactly_one_page_and_the_head_on_the_first() {
        let mut diff = String::from("--- a/x\n+++ b/x\n");
        for hunk in 0..45 {
            diff.push_str(&format!(
                "@@ -{hunk} +{hunk} @@\n-old {hunk}\n+new {hunk}\n"
            ));
        }
        diff.push_str("--- a/y\n+++ b/y\ny: deleted (binary, 9 bytes)\n");
        let pages: Vec<DiffPage> = [0, 20, 40]
            .into_iter()
            .map(|from| page(&diff, from))
            .collect();
        assert!(pages.iter().all(|p| p.hunks == 45));
        assert!(pages[0].diff.starts_with("--- a/x\n+++ b/x\n@@ -0 +0 @@\n"));
        assert_eq!(pages[0].diff.matches("@@ -").count(), 20);
        assert!(pages[1].diff.starts_with("@@ -20 +20 @@\n"));
        assert_eq!(pages[2].diff.matches("@@ -").count(), 5);
        assert!(pages[2].diff.ends_with("y: deleted (binary, 9 bytes)\n"));
        let joined: String = pages.iter().map(|p| p.diff.as_str()).collect();
        assert_eq!(joined, diff);
        assert_eq!(page(&diff, 45).diff, "");
        assert_eq!(page(&diff, usize::MAX).diff, "");
        // No hunks at all (a binary file's line): the whole of it is the first page.
        assert_eq!(
            page("x: created (binary)\n", 0).diff,
            "x: created (binary)\n"
        );
    }
}
