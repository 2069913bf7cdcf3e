//! Diffs a page at a time: the console answers the first page of each diff with the number of its
//! hunks, and each next page on request, so a large diff is neither sent nor drawn whole.
//!
//! A page runs from a line of the diff for at most [`HUNKS_A_PAGE`] hunks and about [`PAGE_BYTES`]
//! bytes, ending at a line's end, so one huge hunk is cut across pages too; the answer says where the
//! next page starts. A hunk starts at a line beginning `@@` and runs to the next one (a later file's
//! `---` and `+++` lines go with the hunk before them). A single line longer than [`PAGE_BYTES`] is
//! shown cut, with a line saying how long it is.

use serde::Serialize;

/// Hunks on a page, at most.
pub const HUNKS_A_PAGE: usize = 20;

/// Bytes on a page: a page ends at the first line's end past this.
pub const PAGE_BYTES: usize = 256 << 10;

/// A page of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct DiffPage {
    /// The page's lines.
    pub diff: String,
    /// The line it starts at.
    pub from: usize,
    /// The line the next page starts at (`None`: this page ends the diff).
    pub next: Option<usize>,
    /// How many hunks the whole diff has.
    pub hunks: usize,
}

/// The page of `diff` starting at line `from` (past the last line: an empty page).
pub(super) fn page(diff: &str, from: usize) -> DiffPage {
    let lines: Vec<&str> = diff.split_inclusive('\n').collect();
    let hunks = lines.iter().filter(|line| line.starts_with("@@")).count();
    let mut text = String::new();
    let mut heads = 0;
    let mut end = from.min(lines.len());
    for line in lines.iter().skip(from) {
        let head = line.starts_with("@@");
        let full = text.len() >= PAGE_BYTES || (head && heads == HUNKS_A_PAGE);
        if full && end > from {
            break;
        }
        heads += usize::from(head);
        push_line(&mut text, line);
        end += 1;
    }
    DiffPage {
        diff: text,
        from,
        next: (end < lines.len()).then_some(end),
        hunks,
    }
}

/// Adds `line` to `page`, cut with a note when it alone is longer than a page.
fn push_line(page: &mut String, line: &str) {
    if line.len() <= PAGE_BYTES {
        page.push_str(line);
        return;
    }
    let mut cut = PAGE_BYTES;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    page.push_str(&line[..cut]);
    page.push_str(&format!(
        "\n... this line is {} bytes: the rest is not shown\n",
        line.len()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows `next` from the first page to the end.
    fn all_pages(diff: &str) -> Vec<DiffPage> {
        let mut pages = vec![page(diff, 0)];
        while let Some(next) = pages.last().unwrap().next {
            pages.push(page(diff, next));
        }
        pages
    }

    #[test]
    fn every_line_is_on_exactly_one_page_and_a_page_holds_20_hunks() {
        let mut diff = String::from("--- a/x\n+++ b/x\n");
        for hunk in 0..45 {
            diff.push_str(&format!(
                "@@ -{hunk} +{hunk} @@\n-old {hunk}\n+new {hunk}\n"
            ));
        }
        diff.push_str("--- a/y\n+++ b/y\ny: deleted (binary, 9 bytes)\n");
        let pages = all_pages(&diff);
        assert_eq!(pages.len(), 3);
        assert!(pages.iter().all(|p| p.hunks == 45));
        assert!(pages[0].diff.starts_with("--- a/x\n+++ b/x\n@@ -0 +0 @@\n"));
        assert_eq!(pages[0].diff.matches("@@ -").count(), 20);
        assert!(pages[1].diff.starts_with("@@ -20 +20 @@\n"));
        assert_eq!(pages[2].diff.matches("@@ -").count(), 5);
        assert!(pages[2].diff.ends_with("y: deleted (binary, 9 bytes)\n"));
        assert_eq!(
            pages.iter().map(|p| p.diff.as_str()).collect::<String>(),
            diff
        );
        assert_eq!(page(&diff, usize::MAX).diff, "");
        assert_eq!(page(&diff, usize::MAX).next, None);
        // No hunks at all (a binary file's line): the whole of it is the first page.
        let binary = page("x: created (binary)\n", 0);
        assert_eq!(
            (binary.diff.as_str(), binary.next),
            ("x: created (binary)\n", None)
        );
    }

    #[test]
    fn one_huge_hunk_is_cut_across_pages_at_line_ends() {
        let mut diff = String::from("--- a/x\n+++ b/x\n@@ -1,40000 +1,40000 @@\n");
        for line in 0..40_000 {
            diff.push_str(&format!("-old line {line:05}\n+new line {line:05}\n"));
        }
        let pages = all_pages(&diff);
        assert!(pages.len() > 3, "{} pages", pages.len());
        assert!(pages.iter().all(|p| p.diff.len() < PAGE_BYTES + 64));
        assert!(pages.iter().all(|p| p.diff.ends_with('\n')));
        assert_eq!(
            pages.iter().map(|p| p.diff.as_str()).collect::<String>(),
            diff
        );
    }

    #[test]
    fn a_line_longer_than_a_page_is_shown_cut_and_says_so() {
        let diff = format!("@@ -1 +1 @@\n+{}\n-short\n", "é".repeat(PAGE_BYTES));
        let pages = all_pages(&diff);
        assert_eq!(pages.len(), 2);
        assert!(pages[0].diff.starts_with("@@ -1 +1 @@\n+é"));
        assert!(pages[0].diff.ends_with(&format!(
            "... this line is {} bytes: the rest is not shown\n",
            2 * PAGE_BYTES + 2
        )));
        assert_eq!(pages[1].diff, "-short\n");
    }
}
