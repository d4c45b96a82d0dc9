//! A shell command split into the commands it runs (issue 53, point 7), so a rule
//! judges each of them: `ls | wc -l` is two commands, neither of which `Bash(rm -rf *)`
//! covers; `ls && rm -rf build` holds one it does.
//!
//! The split follows the agents' own shells (bash, sh): `;`, `&&`, `||`, `|`, `|&`,
//! `&`, line breaks and `( … )` end a command; `$( … )`, `` ` … ` `` and `<( … )` hold
//! commands of their own; redirections belong to their command but are not its words.
//! Quotes and backslashes are read as the shell reads them, so a separator inside
//! quotes separates nothing. What this reader cannot follow for sure (a heredoc, an
//! unclosed quote, `$(( … ))`, `case`, a function definition, a command whose name is
//! computed when it runs) makes a part [`ShellPart::unparseable`]: from there on the
//! command is one part that no rule can judge, so the call is asked about, never
//! allowed, and never denied for what cannot be read.

/// One command of a shell command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellPart {
    /// Where it starts in the command line (characters), to order the parts as written.
    start: usize,
    text: String,
    words: Vec<String>,
    source: String,
    plain: bool,
    unparseable: Option<&'static str>,
}

impl ShellPart {
    /// The part as written, redirections included (for an unparseable part: the rest
    /// of the command line from where it starts).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its words as the program receives them (quotes and backslashes removed),
    /// without the reserved words before it (`if`, `then`, `do`, `!`, `{` …), the
    /// variable assignments before it and its redirections.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Why the part cannot be judged, when it cannot.
    pub fn unparseable(&self) -> Option<&'static str> {
        self.unparseable
    }

    /// Whether a rule for its words says all it does: no variable set before it, no
    /// redirection that writes a file (`/dev/null` and `2>&1` write none), no command
    /// substitution in it. A part that is not plain is never allowed by a rule on its
    /// words, only asked about or denied.
    pub fn is_plain(&self) -> bool {
        self.plain && self.unparseable.is_none()
    }

    /// The readings a rule is matched against. The first is the one an allow must
    /// match (with [`ShellPart::is_plain`]): its words as written, quotes kept,
    /// joined by one space. The others count for ask and deny only: the words without
    /// their quotes, the same without a leading wrapper (`sudo`, `env`, `command`,
    /// `nohup`, …) and with the command's folder dropped (`/bin/rm` → `rm`), and the
    /// text as written.
    pub(crate) fn readings(&self) -> Vec<String> {
        let mut readings = vec![self.source.clone(), self.words.join(" ")];
        let mut bare: &[String] = &self.words;
        while let Some((first, rest)) = bare.split_first() {
            if WRAPPERS.contains(&first.as_str()) || is_assignment(first) {
                bare = rest;
            } else {
                break;
            }
        }
        if let Some((command, rest)) = bare.split_first() {
            let name = command.rsplit('/').next().unwrap_or(command);
            let mut words = vec![name.to_owned()];
            words.extend(rest.iter().cloned());
            readings.push(words.join(" "));
        }
        readings.push(
            self.text
                .chars()
                .map(|c| if c.is_whitespace() { ' ' } else { c })
                .collect(),
        );
        readings
    }
}

/// Commands that run the command after them: a deny rule for `rm -rf *` also covers
/// `sudo rm -rf build`.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice", "xargs",
];

/// Words the shell reads as syntax when they start a command, not as the command.
const RESERVED: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
];

/// Words after which this reader cannot tell the commands apart.
const UNREADABLE: &[(&str, &str)] = &[
    ("case", "a case statement"),
    ("function", "a function definition"),
    ("coproc", "a coprocess"),
    ("((", "an arithmetic command"),
];

/// The commands `command` runs, in the order written (a command substitution after
/// the command it is in). Never empty for a command line holding anything but blanks
/// and comments.
pub fn split_command(command: &str) -> Vec<ShellPart> {
    let chars: Vec<char> = command.chars().collect();
    let mut splitter = Splitter {
        chars: &chars,
        at: 0,
        offset: 0,
        parts: Vec::new(),
    };
    if let Err(why) = splitter.sequence(false) {
        splitter.give_up(why);
    }
    let mut parts = splitter.parts;
    parts.sort_by_key(|part| part.start);
    parts
}

/// The command line a shell (`sh -c LINE`, `bash -lc LINE`) or `eval` is given.
fn inner_line(words: &[String]) -> Option<String> {
    let (first, rest) = words.split_first()?;
    let name = first.rsplit('/').next().unwrap_or(first);
    if name == "eval" {
        return Some(rest.join(" "));
    }
    if !SHELLS.contains(&name) {
        return None;
    }
    let flag = rest
        .iter()
        .position(|word| word.starts_with('-') && !word.starts_with("--") && word.contains('c'))?;
    rest.get(flag + 1).cloned()
}

/// Shells that run the command line given with `-c`.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish"];

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why the rest of a command line cannot be read, and where the part it ends began.
struct Stop {
    why: &'static str,
    from: usize,
}

/// One word being read.
#[derive(Default)]
struct Word {
    value: String,
    source: String,
    /// Quoted or escaped anywhere (then it is no reserved word and no assignment).
    quoted: bool,
    /// Holds an expansion (`$x`, `$(…)`, `` `…` ``) or an unquoted glob: what it will
    /// be is known only when it runs.
    dynamic: bool,
    substituted: bool,
}

/// The command being read.
#[derive(Default)]
struct Command {
    start: Option<usize>,
    end: usize,
    words: Vec<String>,
    sources: Vec<String>,
    assigned: bool,
    writes: bool,
    substituted: bool,
    /// Set when its name is computed at run time.
    unknown: bool,
    redirected: bool,
}

struct Splitter<'a> {
    chars: &'a [char],
    at: usize,
    /// Where `chars` starts in the whole command line (for a backquoted command).
    offset: usize,
    parts: Vec<ShellPart>,
}

impl Splitter<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn text(&self, from: usize, to: usize) -> String {
        self.chars[from.min(self.chars.len())..to.min(self.chars.len())]
            .iter()
            .collect::<String>()
            .trim()
            .to_owned()
    }

    /// Everything from the part that could not be read on is one unparseable part.
    fn give_up(&mut self, stop: Stop) {
        let text = self.text(stop.from, self.chars.len());
        self.parts.push(ShellPart {
            start: self.offset + stop.from,
            text,
            words: Vec::new(),
            source: String::new(),
            plain: false,
            unparseable: Some(stop.why),
        });
    }

    /// Reads commands until the end (or, `inside`, a `)` closing a substitution).
    fn sequence(&mut self, inside: bool) -> Result<(), Stop> {
        let mut command = Command::default();
        let mut depth = 0usize;
        loop {
            let Some(c) = self.peek(0) else {
                if inside {
                    return Err(self.stop(&command, "an unclosed \"$(\""));
                }
                self.finish(&mut command);
                return Ok(());
            };
            match c {
                ' ' | '\t' | '\r' => self.at += 1,
                '\\' if self.peek(1) == Some('\n') => self.at += 2,
                '\n' | ';' => {
                    if c == ';' && self.peek(1) == Some(';') {
                        return Err(self.stop(&command, "a case statement"));
                    }
                    self.at += 1;
                    self.finish(&mut command);
                }
                '&' | '|' => {
                    if c == '&' && self.peek(1) == Some('>') {
                        self.redirection(&mut command)?;
                        continue;
                    }
                    self.at += 1;
                    if matches!(self.peek(0), Some('&' | '|')) {
                        self.at += 1;
                    }
                    self.finish(&mut command);
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '(' => {
                    if command.start.is_some() {
                        return Err(self.stop(&command, "a \"(\" inside a command"));
                    }
                    if self.peek(1) == Some('(') {
                        return Err(self.stop(&command, "an arithmetic command"));
                    }
                    self.at += 1;
                    depth += 1;
                }
                ')' => {
                    self.finish(&mut command);
                    self.at += 1;
                    if depth > 0 {
                        depth -= 1;
                    } else if inside {
                        return Ok(());
                    } else {
                        self.at -= 1;
                        return Err(self.stop(&command, "a \")\" that closes nothing"));
                    }
                }
                '<' | '>' if self.peek(1) == Some('(') => {
                    self.word(&mut command)?;
                }
                '<' | '>' => self.redirection(&mut command)?,
                _ => {
                    // A word of digits right before `<` or `>` names a file descriptor.
                    let digits = self.chars[self.at..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .count();
                    if digits > 0 && matches!(self.peek(digits), Some('<' | '>')) {
                        command.start.get_or_insert(self.at);
                        self.at += digits;
                        self.redirection(&mut command)?;
                    } else {
                        self.word(&mut command)?;
                    }
                }
            }
        }
    }

    fn stop(&self, command: &Command, why: &'static str) -> Stop {
        Stop {
            why,
            from: command.start.unwrap_or(self.at),
        }
    }

    /// Ends the command being read, keeping it when it does anything.
    fn finish(&mut self, command: &mut Command) {
        let done = std::mem::take(command);
        let Some(start) = done.start else {
            return;
        };
        // A redirection of a `( … )` group stays only when it writes a file.
        if done.words.is_empty() && !done.assigned && !done.writes {
            return;
        }
        // `sh -c 'LINE'` and `eval LINE` run a command line of their own: its parts
        // are parts of this one (a deny rule covers `bash -c 'rm -rf build'`).
        if let Some(line) = inner_line(&done.words) {
            let chars: Vec<char> = line.chars().collect();
            let mut nested = Splitter {
                chars: &chars,
                at: 0,
                // After the command that runs them, before the next one.
                offset: self.offset + start + 1,
                parts: Vec::new(),
            };
            if let Err(stop) = nested.sequence(false) {
                nested.give_up(stop);
            }
            self.parts.extend(nested.parts);
        }
        self.parts.push(ShellPart {
            start: self.offset + start,
            text: self.text(start, done.end),
            source: done.sources.join(" "),
            plain: !done.assigned && !done.writes && !done.substituted,
            unparseable: done
                .unknown
                .then_some("a command whose name is known only when it runs"),
            words: done.words,
        });
    }

    /// A redirection (`>`, `>>`, `2>&1`, `&>`, `<`, `<<<` …) and its target.
    fn redirection(&mut self, command: &mut Command) -> Result<(), Stop> {
        command.start.get_or_insert(self.at);
        command.redirected = true;
        let mut op = String::new();
        while let Some(c) = self.peek(0).filter(|c| matches!(c, '<' | '>' | '&' | '|')) {
            // `>|` clobbers; `|` after anything else is a pipe.
            if c == '|' && op != ">" {
                break;
            }
            if c == '&' && !op.is_empty() && op != ">" && op != "<" {
                break;
            }
            op.push(c);
            self.at += 1;
            if op.len() == 3 {
                break;
            }
        }
        if op == "<<" || op == "<<-" {
            return Err(self.stop(command, "a heredoc"));
        }
        if op.contains("<<") && op != "<<<" {
            return Err(self.stop(command, "a redirection this reader does not know"));
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.at += 1;
        }
        let mut target = Word::default();
        self.read_word(&mut target, command)?;
        if target.source.is_empty() {
            return Err(self.stop(command, "a redirection without a target"));
        }
        command.end = self.at;
        let duplicates = (op == ">&" || op == "<&")
            && (target.value == "-" || target.value.chars().all(|c| c.is_ascii_digit()));
        let reads = op == "<" || op == "<<<" || (op == "<&" && duplicates);
        let harmless = duplicates || reads || (target.value == "/dev/null" && !target.dynamic);
        if !harmless {
            command.writes = true;
        }
        Ok(())
    }

    /// A word of the command: a reserved word, an assignment, or one of its words.
    fn word(&mut self, command: &mut Command) -> Result<(), Stop> {
        let start = self.at;
        command.start.get_or_insert(start);
        let mut word = Word::default();
        self.read_word(&mut word, command)?;
        command.end = self.at;
        let naming = command.words.is_empty();
        command.substituted |= word.substituted;
        if naming && !word.quoted && !command.assigned && !command.redirected {
            if RESERVED.contains(&word.source.as_str()) {
                return Ok(());
            }
            if let Some((_, why)) = UNREADABLE.iter().find(|(w, _)| *w == word.source) {
                return Err(self.stop(command, why));
            }
        }
        // `NAME=value` before the command (its name unquoted) sets a variable for it.
        if naming && is_assignment(&word.source) {
            command.assigned = true;
            return Ok(());
        }
        if naming && word.dynamic {
            command.unknown = true;
        }
        command.words.push(word.value);
        command.sources.push(word.source);
        Ok(())
    }

    /// Reads one word up to an unquoted blank or operator.
    fn read_word(&mut self, word: &mut Word, command: &mut Command) -> Result<(), Stop> {
        let begin = self.at;
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | ')' => break,
                '(' => return Err(self.stop(command, "a \"(\" inside a command")),
                '<' | '>' if self.peek(1) == Some('(') && self.at == begin => {
                    self.at += 2;
                    self.substitution(word, command)?;
                    word.value.extend(&self.chars[begin..self.at]);
                }
                '<' | '>' => break,
                '\'' => {
                    self.at += 1;
                    word.quoted = true;
                    loop {
                        match self.peek(0) {
                            None => return Err(self.stop(command, "an unclosed quote")),
                            Some('\'') => break,
                            Some(c) => word.value.push(c),
                        }
                        self.at += 1;
                    }
                    self.at += 1;
                }
                '"' => {
                    self.at += 1;
                    word.quoted = true;
                    self.double_quoted(word, command)?;
                }
                '\\' => {
                    word.quoted = true;
                    match self.peek(1) {
                        None => return Err(self.stop(command, "a \"\\\" at the end")),
                        Some('\n') => {}
                        Some(c) => word.value.push(c),
                    }
                    self.at += 2;
                }
                '$' => self.dollar(word, command)?,
                '`' => self.backquoted(word, command)?,
                '*' | '?' => {
                    word.dynamic = true;
                    word.value.push(c);
                    self.at += 1;
                }
                // `[` alone is the `test` command; in a word, a glob.
                '[' => {
                    word.dynamic |= !matches!(self.peek(1), None | Some(' ' | '\t' | '['));
                    word.value.push(c);
                    self.at += 1;
                }
                _ => {
                    word.value.push(c);
                    self.at += 1;
                }
            }
        }
        word.source = self.chars[begin..self.at].iter().collect();
        Ok(())
    }

    /// Inside `"…"`, after the opening quote, up to and past the closing one.
    fn double_quoted(&mut self, word: &mut Word, command: &mut Command) -> Result<(), Stop> {
        loop {
            match self.peek(0) {
                None => return Err(self.stop(command, "an unclosed quote")),
                Some('"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some('\\') => {
                    match self.peek(1) {
                        None => return Err(self.stop(command, "an unclosed quote")),
                        Some('\n') => {}
                        Some(c @ ('$' | '`' | '"' | '\\')) => word.value.push(c),
                        Some(c) => {
                            word.value.push('\\');
                            word.value.push(c);
                        }
                    }
                    self.at += 2;
                }
                Some('$') => self.dollar(word, command)?,
                Some('`') => self.backquoted(word, command)?,
                Some(c) => {
                    word.value.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// A `$`: a command substitution, a parameter expansion, or a plain `$`.
    fn dollar(&mut self, word: &mut Word, command: &mut Command) -> Result<(), Stop> {
        let from = self.at;
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                Err(self.stop(command, "an arithmetic expansion"))
            }
            Some('(') => {
                self.at += 2;
                self.substitution(word, command)?;
                word.value.extend(&self.chars[from..self.at]);
                Ok(())
            }
            Some('\'') => Err(self.stop(command, "an ANSI-C quoted string")),
            Some('{') => {
                let close = self.chars[self.at..].iter().position(|c| *c == '}');
                let Some(close) = close else {
                    return Err(self.stop(command, "an unclosed \"${\""));
                };
                let inner = &self.chars[self.at + 2..self.at + close];
                if inner
                    .iter()
                    .any(|c| matches!(c, '$' | '`' | '{' | '"' | '\''))
                {
                    return Err(self.stop(command, "a nested parameter expansion"));
                }
                self.at += close + 1;
                word.dynamic = true;
                word.value.extend(&self.chars[from..self.at]);
                Ok(())
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                self.at += 2;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.at += 1;
                    }
                }
                word.dynamic = true;
                word.value.extend(&self.chars[from..self.at]);
                Ok(())
            }
            _ => {
                word.value.push('$');
                self.at += 1;
                Ok(())
            }
        }
    }

    /// After `$(` or `<(`: the commands inside, read as commands of their own, up to
    /// and past the closing `)`.
    fn substitution(&mut self, word: &mut Word, command: &mut Command) -> Result<(), Stop> {
        word.dynamic = true;
        word.substituted = true;
        // What cannot be read inside starts a part at the command holding it.
        self.sequence(true).map_err(|stop| Stop {
            why: stop.why,
            from: command
                .start
                .map_or(stop.from, |start| start.min(stop.from)),
        })
    }

    /// `` `…` ``: the text inside, with its backslashes read, split as a command line
    /// of its own.
    fn backquoted(&mut self, word: &mut Word, command: &mut Command) -> Result<(), Stop> {
        let from = self.at;
        self.at += 1;
        let mut inner = String::new();
        loop {
            match self.peek(0) {
                None => return Err(self.stop(command, "an unclosed \"`\"")),
                Some('`') => break,
                Some('\\') if matches!(self.peek(1), Some('`' | '\\' | '$')) => {
                    inner.extend(self.peek(1));
                    self.at += 2;
                }
                Some(c) => {
                    inner.push(c);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        if inner.contains('`') {
            return Err(self.stop(command, "nested backquotes"));
        }
        let inner_chars: Vec<char> = inner.chars().collect();
        let mut nested = Splitter {
            chars: &inner_chars,
            at: 0,
            offset: self.offset + from + 1,
            parts: Vec::new(),
        };
        if let Err(stop) = nested.sequence(false) {
            nested.give_up(stop);
        }
        self.parts.extend(nested.parts);
        word.dynamic = true;
        word.substituted = true;
        word.value.extend(&self.chars[from..self.at]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(command: &str) -> Vec<String> {
        split_command(command)
            .iter()
            .map(|part| match part.unparseable() {
                Some(_) => format!("?{}", part.text()),
                None => part.text().to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_command_line_is_split_where_the_shell_splits_it() {
        let cases: &[(&str, &[&str])] = &[
            ("ls", &["ls"]),
            ("ls | wc -l", &["ls", "wc -l"]),
            ("npm test 2>&1", &["npm test 2>&1"]),
            ("git log | head", &["git log", "head"]),
            ("ls && rm -rf build", &["ls", "rm -rf build"]),
            ("a; b || c & d |& e", &["a", "b", "c", "d", "e"]),
            ("a\nb", &["a", "b"]),
            ("echo 'a; b' \"c | d\"", &["echo 'a; b' \"c | d\""]),
            ("echo a\\;b", &["echo a\\;b"]),
            (
                "git status $(rm -rf /)",
                &["git status $(rm -rf /)", "rm -rf /"],
            ),
            (
                "echo \"$(rm x; ls)\"",
                &["echo \"$(rm x; ls)\"", "rm x", "ls"],
            ),
            ("echo `rm x`", &["echo `rm x`", "rm x"]),
            ("(cd x && rm -rf build)", &["cd x", "rm -rf build"]),
            ("if true; then rm -rf b; fi", &["if true", "then rm -rf b"]),
            ("ls # ; rm -rf /", &["ls"]),
            ("diff <(ls a) b", &["diff <(ls a) b", "ls a"]),
            ("cat <<EOF\nrm -rf /\nEOF", &["?cat <<EOF\nrm -rf /\nEOF"]),
            ("ls; echo 'open", &["ls", "?echo 'open"]),
            ("echo $((1+2))", &["?echo $((1+2))"]),
            ("$CMD -rf build", &["?$CMD -rf build"]),
            ("f() { rm -rf /; }; f", &["?f() { rm -rf /; }; f"]),
            ("case x in a) rm;; esac", &["?case x in a) rm;; esac"]),
            ("   ", &[]),
            (
                "bash -c 'ls; rm -rf build'",
                &["bash -c 'ls; rm -rf build'", "ls", "rm -rf build"],
            ),
            (
                "eval \"rm -rf build\"",
                &["eval \"rm -rf build\"", "rm -rf build"],
            ),
        ];
        for (command, expected) in cases {
            assert_eq!(texts(command), *expected, "{command:?}");
        }
    }

    #[test]
    fn words_are_what_the_program_receives() {
        let part = &split_command("FOO=1 'r'm  -rf \"build dir\" > /dev/null")[0];
        assert_eq!(part.words(), ["rm", "-rf", "build dir"]);
        assert!(!part.is_plain(), "an assignment before it");
        let part = &split_command("if ! git status 2>&1")[0];
        assert_eq!(part.words(), ["git", "status"]);
        assert!(part.is_plain());
        assert!(!split_command("ls > out.txt")[0].is_plain());
        assert!(split_command("ls 2>/dev/null")[0].is_plain());
        assert!(split_command("wc -l < a.txt")[0].is_plain());
        assert!(!split_command("echo $(date)")[0].is_plain());
        assert!(split_command("echo '$(date)'")[0].is_plain());
        let readings = split_command("sudo /bin/rm  -rf x")[0].readings();
        assert!(readings.contains(&"rm -rf x".to_owned()), "{readings:?}");
    }
}
