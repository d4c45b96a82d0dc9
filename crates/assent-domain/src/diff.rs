//! What a change to a text does to its lines, for the diffs people are shown before
//! they confirm a write (a coding agent's `Edit`, an MCP server's file write).

/// The lines of `before` that `after` replaces: everything between the lines both
/// share at the start and at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedLines<'a> {
    /// How many lines both share at the start (the change begins on line `head + 1`).
    pub head: usize,
    /// The lines of `before` that go.
    pub removed: Vec<&'a str>,
    /// The lines of `after` that come in their place.
    pub added: Vec<&'a str>,
}

/// The lines `after` changes in `before` (see [`ChangedLines`]).
pub fn changed_lines<'a>(before: &'a str, after: &'a str) -> ChangedLines<'a> {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    ChangedLines {
        head,
        removed: old[head..old.len() - tail].to_vec(),
        added: new[head..new.len() - tail].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_shared_start_and_end_are_left_out() {
        let changed = changed_lines("a\nb\nc\nd\n", "a\nB\nC\nd\n");
        assert_eq!(changed.head, 1);
        assert_eq!(changed.removed, ["b", "c"]);
        assert_eq!(changed.added, ["B", "C"]);
        let same = changed_lines("x\ny\n", "x\ny\n");
        assert!(same.removed.is_empty() && same.added.is_empty());
    }

    proptest! {
        /// Putting the change back between the shared lines gives `after` again.
        #[test]
        fn the_change_between_the_shared_lines_rebuilds_after(
            before in proptest::collection::vec("[ab]{0,2}", 0..8),
            after in proptest::collection::vec("[ab]{0,2}", 0..8),
        ) {
            let (before, after) = (before.join("\n"), after.join("\n"));
            let changed = changed_lines(&before, &after);
            let old: Vec<&str> = before.lines().collect();
            let tail = old.len() - changed.head - changed.removed.len();
            let mut rebuilt: Vec<&str> = old[..changed.head].to_vec();
            rebuilt.extend(&changed.added);
            rebuilt.extend(&old[old.len() - tail..]);
            prop_assert_eq!(rebuilt, after.lines().collect::<Vec<_>>());
        }
    }
}
