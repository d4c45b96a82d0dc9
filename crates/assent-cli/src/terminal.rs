//! The terminal side of `assent review`: one key at a time (the terminal is raw only
//! while a key is read, on a thread of its own, so the change feed is followed while a
//! person thinks), a line typed key by key, the person's editor on a file, the
//! person's pager, and desktop notices through the platform's own command; [`Restore`] puts the terminal back on
//! every way out.

use crate::CliError;
use console::{Key, Term};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tokio::sync::mpsc;

/// The terminal's settings as the reviewer found them, put back when this is dropped:
/// on every way out of `assent review`, an error while a key is awaited and a panic
/// (dropped while unwinding) included. The key-reading thread may still be blocked in
/// a read with the terminal raw when the session ends; without this, the shell would
/// be left without echo or line editing.
pub struct Restore {
    #[cfg(unix)]
    saved: Option<rustix::termios::Termios>,
}

impl Restore {
    /// Saves stdin's terminal settings (none when stdin is no terminal).
    pub fn save() -> Self {
        Self {
            #[cfg(unix)]
            saved: rustix::termios::tcgetattr(std::io::stdin()).ok(),
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            let restored = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                saved,
            );
            if let Err(error) = restored {
                tracing::debug!(%error, "cannot restore the terminal's settings");
            }
        }
    }
}

/// Keys from the terminal, read one at a time on request: the reading thread waits
/// until asked, so nothing reads the terminal while the person's editor has it.
pub struct Keys {
    requests: std::sync::mpsc::Sender<()>,
    keys: mpsc::UnboundedReceiver<std::io::Result<Key>>,
    /// A key was asked for and has not been taken yet (a dropped [`Keys::next`] leaves
    /// its request standing; the next call takes its key).
    asked: bool,
}

impl Keys {
    /// Starts the reading thread.
    pub fn start() -> Self {
        let (requests, asked) = std::sync::mpsc::channel::<()>();
        let (send, keys) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let term = Term::stdout();
            while asked.recv().is_ok() {
                // `read_key_raw`: ctrl-c arrives as a key, and the session ends cleanly
                // with the terminal restored.
                if send.send(term.read_key_raw()).is_err() {
                    return;
                }
            }
        });
        Self {
            requests,
            keys,
            asked: false,
        }
    }

    /// The next key the person presses. Cancel-safe: dropped while waiting, the key
    /// is kept for the next call.
    pub async fn next(&mut self) -> Result<Key, CliError> {
        if !self.asked {
            self.requests
                .send(())
                .map_err(|_| CliError::failed("the terminal's key reader stopped"))?;
            self.asked = true;
        }
        let key = self
            .keys
            .recv()
            .await
            .ok_or_else(|| CliError::failed("the terminal's key reader stopped"))?;
        self.asked = false;
        key.map_err(|e| CliError::failed(format!("cannot read a key from the terminal: {e}")))
    }

    /// A line the person types after `prompt`, echoed as typed; `None` when they press
    /// Escape or ctrl-c instead of Enter.
    pub async fn line(&mut self, prompt: &str) -> Result<Option<String>, CliError> {
        self.line_from(prompt, "").await
    }

    /// [`Keys::line`], starting from `initial` (shown after the prompt, to accept with
    /// Enter or change with Backspace and typing).
    pub async fn line_from(
        &mut self,
        prompt: &str,
        initial: &str,
    ) -> Result<Option<String>, CliError> {
        say_inline(prompt);
        say_inline(&crate::render::visible(initial));
        let mut line = initial.to_owned();
        loop {
            match self.next().await? {
                Key::Enter => {
                    say("");
                    return Ok(Some(line));
                }
                Key::Escape | Key::CtrlC => {
                    say("");
                    return Ok(None);
                }
                Key::Backspace if line.pop().is_some() => say_inline("\u{8} \u{8}"),
                Key::Char(c) if !c.is_control() => {
                    line.push(c);
                    say_inline(&crate::render::visible(&c.to_string()));
                }
                _ => {}
            }
        }
    }
}

/// Prints `text` and a newline to the terminal at once.
pub fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// Prints `text` without a newline.
fn say_inline(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{text}").and_then(|()| out.flush());
}

/// The person's editor command: `$VISUAL`, else `$EDITOR`, else `vi`.
fn editor() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .map(|value| value.trim().to_owned())
        .find(|value| !value.is_empty())
        .unwrap_or_else(|| "vi".to_owned())
}

/// Opens the person's editor on `text` (in a private temporary `.json` file) and
/// returns what they saved. The editor command is run by `sh`, so `EDITOR="code
/// --wait"` works as in git.
pub fn edit(text: &str) -> Result<String, CliError> {
    edit_as(text, ".json")
}

/// [`edit`] in a file whose name ends with `suffix` (`.rs` for a file's content, so
/// the editor reads it as what it is).
pub fn edit_as(text: &str, suffix: &str) -> Result<String, CliError> {
    let file = tempfile::Builder::new()
        .prefix("assent-edit-")
        .suffix(suffix)
        .tempfile()
        .map_err(|e| CliError::failed(format!("cannot create a file to edit: {e}")))?;
    std::fs::write(file.path(), text)
        .map_err(|e| CliError::failed(format!("cannot write the file to edit: {e}")))?;
    let editor = editor();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .map_err(|e| CliError::failed(format!("cannot start the editor {editor:?}: {e}")))?;
    if !status.success() {
        return Err(CliError::failed(format!(
            "the editor {editor:?} exited with {status}; nothing was changed"
        )));
    }
    std::fs::read_to_string(file.path())
        .map_err(|e| CliError::failed(format!("cannot read the edited file: {e}")))
}

/// The person's pager command, `$PAGER`, when it is set and not empty.
pub fn pager() -> Option<String> {
    std::env::var("PAGER")
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// Shows `text` through `pager` (run by `sh`, as git runs it, with `LESS=FRX` unless
/// `LESS` is set, so colour shows and a short text needs no key) and waits for it.
pub fn page(pager: &str, text: &str) -> Result<(), CliError> {
    let mut command = Command::new("sh");
    command.arg("-c").arg(pager).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        command.env("LESS", "FRX");
    }
    let mut child = command
        .spawn()
        .map_err(|e| CliError::failed(format!("cannot start the pager {pager:?}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before the end closes its input: not an error.
        let _ = stdin.write_all(text.as_bytes());
    }
    child
        .wait()
        .map_err(|e| CliError::failed(format!("the pager {pager:?} failed: {e}")))?;
    Ok(())
}

/// The terminal's size as `(rows, columns)`, when it has one.
pub fn size() -> Option<(usize, usize)> {
    Term::stdout()
        .size_checked()
        .map(|(rows, columns)| (usize::from(rows), usize::from(columns)))
        .filter(|(rows, columns)| *rows > 0 && *columns > 0)
}

/// Raises the desktop notice of a newly queued set: its agent, its first tool and that
/// item's summary on one line ([`notify`]).
pub fn notify_set(set: &assent_domain::ChangeSet) {
    let Some(item) = set.items.first() else {
        return;
    };
    let more = match set.items.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    notify(
        &format!(
            "Assent: {} waits for you",
            assent_domain::one_line(&set.agent_id)
        ),
        &format!(
            "{}: {}{more}",
            assent_domain::one_line(&item.tool_name),
            crate::render::cut(&item.human_summary, 120)
        ),
    );
}

/// Raises a desktop notification with `title` and `body` through the platform's own
/// command (`notify-send` on Linux and the BSDs, `osascript` on macOS), without waiting
/// for it. Where there is none, nothing happens but one debug line: a notice is a
/// courtesy, never an error.
pub fn notify(title: &str, body: &str) {
    let command = if cfg!(target_os = "macos") {
        on_path("osascript").map(|osascript| {
            let mut command = Command::new(osascript);
            command.arg("-e").arg(format!(
                "display notification {} with title {}",
                apple_string(body),
                apple_string(title)
            ));
            command
        })
    } else {
        on_path("notify-send").map(|notify_send| {
            let mut command = Command::new(notify_send);
            command.args(["--app-name", "assent", "--", title, body]);
            command
        })
    };
    let Some(mut command) = command else {
        tracing::debug!("no desktop notification command on this system; notice skipped");
        return;
    };
    let spawned = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        // Reaped on a thread of its own: a notification service that hangs holds
        // nothing of the reviewer's.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(error) => tracing::debug!(%error, "desktop notice not raised"),
    }
}

/// `text` as an AppleScript string literal.
fn apple_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The first executable file called `name` in a folder of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apple_strings_escape_quotes_and_backslashes() {
        assert_eq!(apple_string(r#"a "b" \c"#), r#""a \"b\" \\c""#);
    }
}
