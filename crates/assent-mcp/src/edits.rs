//! What an `edit_file` call of the npm filesystem server
//! (`@modelcontextprotocol/server-filesystem`, its `applyFileEdits`) leaves in a file,
//! computed the way the server computes it, so the diff a person confirms is the file
//! the server writes.
//!
//! The server reads the whole file, turns every `\r\n` into `\n` (in the file and in
//! each edit's texts), and applies the edits in order: an `oldText` found as it is
//! is replaced at its first occurrence; else the first run of lines equal to its lines
//! but for their leading and trailing white space (JavaScript's `trim`) is replaced by
//! `newText`'s lines, re-indented (the first to the found line's indentation, the
//! others by how much deeper they are than the `oldText` line they stand for); else the
//! call fails. The exact replacement is JavaScript's `String.prototype.replace`: with a
//! string (releases up to 2026.1.14), whose `$$`, `$&`, `` $` `` and `$'` in `newText`
//! substitute, or with a function (2026.7.4 and later), which takes `newText` as it is.
//! Both releases call themselves version 0.2.0, so a gateway cannot tell which one it
//! fronts: where the two would write different text, what the file will hold is not
//! known, and no diff is shown ([`edited`] says why).
//!
//! The text edited must be the file whole, as the server reads it (its `read_text_file`
//! without `head`, which would drop the file's last newline).

/// The largest text an edit may leave for a diff (a `$'` repeated in `newText` copies
/// the file's tail each time).
const MAX_EDITED_BYTES: usize = 8 * 1024 * 1024;

/// How many line comparisons the search for a white-space-tolerant match may make over
/// all the edits of one call (a bound on what an agent's edits cost the gateway).
const MAX_LINE_COMPARISONS: usize = 20_000_000;

/// How a release of the server puts an exactly found `oldText`'s `newText` in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replacement {
    /// `String.prototype.replace` with a string: `$$`, `$&`, `` $` `` and `$'` substitute.
    Pattern,
    /// With a function: `newText` as it is.
    Literal,
}

/// Why one computation of the edits gives no text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failed {
    /// Edit `n` (from 1) finds nothing: the server refuses the call.
    NotFound(usize),
    /// Too large or too costly to compute for a diff.
    TooLarge,
}

/// The text the server writes when `edits` (`[(oldText, newText)]`) are applied to a
/// file that holds `text`, or why that cannot be told; `crlf` in the answer says the
/// file's `\r\n` line endings become `\n` (a change no line of a diff shows).
pub(crate) fn edited(text: &str, edits: &[(&str, &str)]) -> Result<Edited, String> {
    let pattern = apply(text, edits, Replacement::Pattern);
    let literal = apply(text, edits, Replacement::Literal);
    match (pattern, literal) {
        (Ok(pattern), Ok(literal)) if pattern == literal => Ok(Edited {
            text: literal,
            crlf: text.contains("\r\n"),
        }),
        (Ok(_), Ok(_)) => Err(DOLLAR_UNSURE.to_owned()),
        (Err(Failed::NotFound(n)), _) | (_, Err(Failed::NotFound(n))) => Err(format!(
            "edit {n}'s oldText is not in the file (the server will refuse the call)"
        )),
        (Err(Failed::TooLarge), _) | (_, Err(Failed::TooLarge)) => {
            Err("the edits leave more text than a diff is computed for".to_owned())
        }
    }
}

/// Why an edit whose `$` patterns the server's releases read two ways shows no diff.
const DOLLAR_UNSURE: &str = "a newText holds `$&`, `$'`, `` $` `` or `$$`, which releases of the \
filesystem server up to 2026.1.14 replace (JavaScript's String.replace) and later ones write as \
they are, and which release runs cannot be told: what the file will hold is not known";

/// What the edits leave ([`edited`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edited {
    /// The file's text after them.
    pub text: String,
    /// Whether the file's `\r\n` line endings become `\n`.
    pub crlf: bool,
}

/// `text` with every `\r\n` as `\n` (the server's `normalizeLineEndings`).
fn normalized(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The edits applied to the whole `file` as one release of the server applies them.
fn apply(file: &str, edits: &[(&str, &str)], replacement: Replacement) -> Result<String, Failed> {
    let mut text = normalized(file);
    let mut budget = MAX_LINE_COMPARISONS;
    for (n, (old, new)) in edits.iter().enumerate() {
        let old = normalized(old);
        let new = normalized(new);
        text = match text.find(&old) {
            Some(at) => {
                let with = match replacement {
                    Replacement::Literal => new,
                    Replacement::Pattern => substitution(&new, &text, at, old.len())?,
                };
                let mut replaced = String::with_capacity(text.len() + with.len());
                replaced.push_str(&text[..at]);
                replaced.push_str(&with);
                replaced.push_str(&text[at + old.len()..]);
                replaced
            }
            None => loose(&text, &old, &new, &mut budget)?.ok_or(Failed::NotFound(n + 1))?,
        };
        if text.len() > MAX_EDITED_BYTES {
            return Err(Failed::TooLarge);
        }
    }
    Ok(text)
}

/// What JavaScript's `replace` with string `template` puts in place of the match at
/// byte `at` (of `len` bytes) in `text` (ECMAScript's GetSubstitution for a string
/// pattern, which has no captures: `$1` and `$<` stay as they are).
fn substitution(template: &str, text: &str, at: usize, len: usize) -> Result<String, Failed> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (put, used) = match after.as_bytes().first() {
            Some(b'$') => ("$", 2),
            Some(b'&') => (&text[at..at + len], 2),
            Some(b'`') => (&text[..at], 2),
            Some(b'\'') => (&text[at + len..], 2),
            _ => ("$", 1),
        };
        out.push_str(put);
        if out.len() > MAX_EDITED_BYTES {
            return Err(Failed::TooLarge);
        }
        rest = &rest[dollar + used..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `c` is white space to JavaScript (`trim`, `\s`): its WhiteSpace and
/// LineTerminator characters, which differ from Rust's `char::is_whitespace` in U+0085
/// (not JavaScript's) and U+FEFF (JavaScript's).
fn js_space(c: char) -> bool {
    c == '\u{FEFF}' || (c.is_whitespace() && c != '\u{85}')
}

fn js_trim(text: &str) -> &str {
    text.trim_matches(js_space)
}

/// The leading white space of `line` (`line.match(/^\s*/)[0]`).
fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches(js_space).len()]
}

/// The server's second try: the first run of `text`'s lines equal to `old`'s but for
/// white space at either end, replaced by `new`'s lines re-indented; `None` when there
/// is none.
fn loose(text: &str, old: &str, new: &str, budget: &mut usize) -> Result<Option<String>, Failed> {
    let old_lines: Vec<&str> = old.split('\n').collect();
    let lines: Vec<&str> = text.split('\n').collect();
    if old_lines.len() > lines.len() {
        return Ok(None);
    }
    for i in 0..=lines.len() - old_lines.len() {
        let mut matched = true;
        for (j, old_line) in old_lines.iter().enumerate() {
            *budget = budget.checked_sub(1).ok_or(Failed::TooLarge)?;
            if js_trim(old_line) != js_trim(lines[i + j]) {
                matched = false;
                break;
            }
        }
        if !matched {
            continue;
        }
        let original = indent(lines[i]);
        let new_lines: Vec<String> = new
            .split('\n')
            .enumerate()
            .map(|(j, line)| {
                if j == 0 {
                    return format!("{original}{}", line.trim_start_matches(js_space));
                }
                let old_indent = old_lines.get(j).map_or("", |l| indent(l));
                let new_indent = indent(line);
                if !old_indent.is_empty() && !new_indent.is_empty() {
                    // Every white-space character JavaScript knows is one UTF-16 unit.
                    let deeper = new_indent
                        .chars()
                        .count()
                        .saturating_sub(old_indent.chars().count());
                    format!(
                        "{original}{}{}",
                        " ".repeat(deeper),
                        line.trim_start_matches(js_space)
                    )
                } else {
                    line.to_owned()
                }
            })
            .collect();
        let mut out: Vec<&str> = lines[..i].to_vec();
        out.extend(new_lines.iter().map(String::as_str));
        out.extend(&lines[i + old_lines.len()..]);
        return Ok(Some(out.join("\n")));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, edits: &[(&str, &str)], expect: Result<&str, &str>) {
        let got = edited(text, edits);
        match expect {
            Ok(after) => assert_eq!(got.map(|e| e.text), Ok(after.to_owned())),
            Err(why) => {
                let error = got.expect_err("no diff");
                assert!(error.contains(why), "{error}");
            }
        }
    }

    #[test]
    fn an_exact_old_text_is_replaced_at_its_first_occurrence() {
        check("a\nb\nb\n", &[("b", "B")], Ok("a\nB\nb\n"));
        check("a\nb\nc\n", &[("b", "B"), ("c", "")], Ok("a\nB\n\n"));
        check(
            "a\n",
            &[("zzz", "B")],
            Err("edit 1's oldText is not in the file"),
        );
    }

    /// Issue 52, point 19: `$&` and its kin substitute in one release and not in the
    /// other, so what the file will hold is not known.
    #[test]
    fn dollar_patterns_that_releases_read_two_ways_show_no_diff() {
        for new in ["[$&]", "$'", "$`", "$$"] {
            check("alpha\nbeta\n", &[("beta", new)], Err("`$&`"));
        }
        // What both read alike is shown: a lone `$`, `$1` and `$<` stay as they are.
        check("a\nb\n", &[("b", "$1 $< $ x$")], Ok("a\n$1 $< $ x$\n"));
        // A `$&` whose match is `$&` itself writes the same either way.
        check("a $& b\n", &[("$&", "$&")], Ok("a $& b\n"));
    }

    #[test]
    fn the_substitution_is_javascripts() {
        let text = "one two three";
        let at = text.find("two").expect("found");
        let put = |template| substitution(template, text, at, 3).expect("small");
        assert_eq!(put("[$&]"), "[two]");
        assert_eq!(put("$`"), "one ");
        assert_eq!(put("$'"), " three");
        assert_eq!(put("$$&"), "$&");
        assert_eq!(put("$1$<x>$"), "$1$<x>$");
        let huge = "$'".repeat(MAX_EDITED_BYTES);
        assert_eq!(
            substitution(&huge, text, at, 3),
            Err(Failed::TooLarge),
            "bounded"
        );
    }

    #[test]
    fn crlf_becomes_lf_and_says_so() {
        let got = edited("one\r\ntwo\r\n", &[("two", "2")]).expect("a diff");
        assert_eq!(got.text, "one\n2\n");
        assert!(got.crlf);
        let got = edited("one\r\ntwo\r\n", &[("one\r\ntwo", "1\r\n2")]).expect("a diff");
        assert_eq!(got.text, "1\n2\n");
    }

    #[test]
    fn a_loose_match_is_reindented_as_the_server_does() {
        // The first line takes the found line's indentation; a deeper line keeps how
        // much deeper it is than its oldText line, in spaces; a line whose oldText line
        // has no indentation (or that has none) is taken as it is. (What the server
        // wrote for these, checked with node against both releases.)
        check(
            "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n",
            &[("if x {\n    y();\n}", "if z {\n        w();\n    v();\n}")],
            Ok("fn f() {\n\tif z {\n\t    w();\n    v();\n}\n}\n"),
        );
        // A line without indentation is taken as it is.
        check(
            "def f():\n\treturn 1\n",
            &[("def f():\n    return 1", "def f():\nreturn 2")],
            Ok("def f():\nreturn 2\n"),
        );
    }

    #[test]
    fn javascripts_white_space_is_not_rusts() {
        assert!(js_space('\u{FEFF}'));
        assert!(!js_space('\u{85}'));
        assert!(js_space('\u{3000}') && js_space('\t') && js_space('\u{2028}'));
        assert!(!js_space('x') && !js_space('\u{200B}'));
    }

    #[test]
    fn an_empty_old_text_inserts_at_the_start() {
        check("a\n", &[("", "z\n")], Ok("z\na\n"));
    }
}
