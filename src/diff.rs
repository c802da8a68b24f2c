//! Unified diffs, line by line: a rewritten summary's old and new text, a prompt override
//! against the embedded default.

use similar::TextDiff;

/// `--- <old_label>` / `+++ <new_label>` and the changed hunks with three lines of context;
/// empty when the texts are equal.
pub(crate) fn unified(old_label: &str, new_label: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    // A final newline on both sides keeps the last line comparable.
    let (old, new) = (with_newline(old), with_newline(new));
    TextDiff::from_lines(old.as_str(), new.as_str())
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

fn with_newline(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff_and_changes_show_as_hunks() {
        assert_eq!(unified("a", "b", "same", "same"), "");
        let d = unified("sum_a (old)", "sum_a (new)", "one\ntwo\nthree", "one\n2\nthree");
        assert_eq!(
            d,
            "--- sum_a (old)\n+++ sum_a (new)\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
        );
    }
}
