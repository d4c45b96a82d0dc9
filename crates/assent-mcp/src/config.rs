//! The clients' own configuration format, read by `assent mcp --config FILE`: the
//! `mcpServers` map of Claude Desktop, Cursor and VS Code, each entry a command
//! (`command`, `args`, `env`) or a Streamable HTTP URL (`url`, `headers`), with an
//! optional `"assent": {"trust": "hints", "category": "...", "tools": {"TOOL": {"preview":
//! {"read": "read_text_file", "path": "path"}}}}` of Assent's own.
//!
//! Reading is pure: a file that is not such a map is an error; an entry that cannot be
//! served is returned as a [`Broken`] server (reported and skipped by the caller), so
//! one bad entry never stops the others.

use crate::catalog::Trust;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What separates a server's name from its tool's in the gateway's tool names
/// (`files__write_file`); a server name may not contain it.
pub const NAMESPACE_SEPARATOR: &str = "__";

/// Where an upstream server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamSource {
    /// A child process spoken to over stdio.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the gateway's environment for it.
        env: BTreeMap<String, String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint's URL (`http://` or `https://`).
        url: String,
        /// Headers sent with every request (an `Authorization`, an API key).
        headers: BTreeMap<String, String>,
    },
}

impl UpstreamSource {
    /// The command line or the URL, as errors and logs name the server, with the
    /// URL's secrets redacted ([`crate::redact`]).
    pub fn describe(&self) -> String {
        match self {
            Self::Command { program, args, .. } => std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Self::Http { url, .. } => crate::redact::redact(url),
        }
    }
}

/// One server of the file that can be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// Its name in the file: the target id of its calls and its tools' prefix.
    pub name: String,
    /// Where it is.
    pub source: UpstreamSource,
    /// Whether its annotations count (`"assent": {"trust": "hints"}`).
    pub trust: Trust,
    /// The category of its target, when the entry names one (else the gateway's).
    pub category: Option<String>,
    /// How a write tool's file is read for its diff, by tool name (`"assent": {"tools":
    /// {"TOOL": {"preview": {"read": "read_text_file", "path": "path"}}}}`).
    pub previews: BTreeMap<String, FilePreview>,
}

/// How a write tool's file is read for its diff (`crate::preview`): the upstream's
/// read tool and the argument naming the file (in the write's arguments and in the
/// read's).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePreview {
    /// The upstream's tool that reads the file (`read_text_file`).
    pub read: String,
    /// The argument that names the file (`path`).
    #[serde(default = "default_path_key")]
    pub path: String,
}

/// The argument a write names its file with when the configuration does not say.
pub(crate) fn default_path_key() -> String {
    "path".to_owned()
}

/// An entry of the file that cannot be served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// Its name in the file.
    pub name: String,
    /// Why it is skipped.
    pub reason: String,
}

/// The servers of a configuration file, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServersConfig {
    /// The entries that can be served.
    pub servers: Vec<ServerEntry>,
    /// The entries that cannot, with the reason.
    pub broken: Vec<Broken>,
}

/// Why a configuration file cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the MCP configuration is not a {{\"mcpServers\": {{NAME: {{...}}}}}} map: {0}")]
pub struct ConfigError(pub String);

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssentPart {
    #[serde(default)]
    trust: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, ToolPart>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolPart {
    preview: FilePreview,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    assent: Option<AssentPart>,
}

/// Reads the `mcpServers` map of `text` (other top-level keys are the client's own and
/// ignored, as are an entry's unknown keys; `"disabled": true` entries are left out).
pub fn parse(text: &str) -> Result<ServersConfig, ConfigError> {
    let file: File = serde_json::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
    let mut config = ServersConfig::default();
    for (name, value) in file.mcp_servers {
        match entry(&name, value) {
            Ok(Some(server)) => config.servers.push(server),
            Ok(None) => {}
            Err(reason) => config.broken.push(Broken { name, reason }),
        }
    }
    Ok(config)
}

/// Why `name` cannot name a server of any gateway (`--server` or an entry of a
/// configuration file), or `None`: it is non-empty, neither starts nor ends with `_`,
/// and holds no `__`. A server's tools are named `NAME__tool` behind a `--config`
/// gateway, split at the first `__`: only such a name makes that split give back the
/// server (`s_` + `_echo` would be `s___echo`, read as server `s`, tool `_echo`).
pub fn server_name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("the server name is empty".to_owned());
    }
    if name.starts_with('_') || name.ends_with('_') {
        return Some(format!(
            "the server name {name:?} starts or ends with `_`, which would run into the `{NAMESPACE_SEPARATOR}` between it and its tools' names"
        ));
    }
    if name.contains(NAMESPACE_SEPARATOR) {
        return Some(format!(
            "the server name {name:?} contains `{NAMESPACE_SEPARATOR}`, which separates it from its tools' names"
        ));
    }
    None
}

/// Whether `name` can name a server of a configuration file: [`server_name_problem`],
/// and only ASCII letters, digits, `_`, `-` and `.` (so its tools' names stay valid
/// MCP tool names).
fn check_name(name: &str) -> Result<(), String> {
    if let Some(problem) = server_name_problem(name) {
        return Err(problem);
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(
            "a server name may hold only ASCII letters, digits, `_`, `-` and `.`".to_owned(),
        );
    }
    Ok(())
}

fn entry(name: &str, value: Value) -> Result<Option<ServerEntry>, String> {
    check_name(name)?;
    let entry: Entry = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if entry.disabled {
        return Ok(None);
    }
    let (trust, category, previews) = match entry.assent {
        None => (Trust::None, None, BTreeMap::new()),
        Some(part) => {
            let trust = match part.trust.as_deref() {
                None | Some("none") => Trust::None,
                Some("hints") => Trust::Hints,
                Some(other) => {
                    return Err(format!(
                        "\"assent\": {{\"trust\": {other:?}}} is neither \"none\" nor \"hints\""
                    ));
                }
            };
            let previews = part
                .tools
                .into_iter()
                .map(|(tool, part)| (tool, part.preview))
                .collect();
            (trust, part.category, previews)
        }
    };
    let source = match (entry.command, entry.url) {
        (Some(_), Some(_)) => return Err("it has both a command and a url".to_owned()),
        (None, None) => return Err("it has neither a command nor a url".to_owned()),
        (Some(program), None) => {
            if let Some(kind) = entry.kind.as_deref()
                && kind != "stdio"
            {
                return Err(format!("a command entry of type {kind:?}"));
            }
            if program.trim().is_empty() {
                return Err("its command is empty".to_owned());
            }
            UpstreamSource::Command {
                program,
                args: entry.args,
                env: entry.env,
            }
        }
        (None, Some(url)) => {
            match entry.kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp") => {}
                Some("sse") => {
                    return Err(
                        "the HTTP+SSE transport (\"type\": \"sse\") is not supported, only Streamable HTTP"
                            .to_owned(),
                    );
                }
                Some(kind) => return Err(format!("a url entry of type {kind:?}")),
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("its url {url:?} is not http:// or https://"));
            }
            UpstreamSource::Http {
                url,
                headers: entry.headers,
            }
        }
    };
    Ok(Some(ServerEntry {
        name: name.to_owned(),
        source,
        trust,
        category,
        previews,
    }))
}

/// The gateway's name for tool `tool` of server `server`: `server__tool`.
pub fn namespaced(server: &str, tool: &str) -> String {
    format!("{server}{NAMESPACE_SEPARATOR}{tool}")
}

/// The server and tool a namespaced tool name names, split at the first `__`: a
/// server name holds none and does not end with `_` ([`server_name_problem`]), so the
/// first `__` is the one after it, whatever the tool's name (`s__` + `_echo`); a
/// server part that no server may be named is no split.
pub fn split_namespaced(name: &str) -> Option<(&str, &str)> {
    name.split_once(NAMESPACE_SEPARATOR)
        .filter(|(server, tool)| server_name_problem(server).is_none() && !tool.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(input: Value, expect: ServersConfig) {
        assert_eq!(parse(&input.to_string()), Ok(expect));
    }

    #[test]
    fn commands_and_urls_with_their_trust() {
        check(
            json!({"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "fs"], "env": {"A": "1"},
                          "assent": {"trust": "hints", "tools": {"put": {"preview":
                              {"read": "get", "path": "file"}}}}},
                "remote": {"type": "http", "url": "https://example.com/mcp",
                           "headers": {"Authorization": "Bearer x"},
                           "assent": {"category": "web"}},
                "off": {"command": "x", "disabled": true}
            }, "globalShortcut": "x"}),
            ServersConfig {
                servers: vec![
                    ServerEntry {
                        name: "files".into(),
                        source: UpstreamSource::Command {
                            program: "npx".into(),
                            args: vec!["-y".into(), "fs".into()],
                            env: [("A".to_owned(), "1".to_owned())].into(),
                        },
                        trust: Trust::Hints,
                        category: None,
                        previews: [(
                            "put".to_owned(),
                            FilePreview {
                                read: "get".into(),
                                path: "file".into(),
                            },
                        )]
                        .into(),
                    },
                    ServerEntry {
                        name: "remote".into(),
                        source: UpstreamSource::Http {
                            url: "https://example.com/mcp".into(),
                            headers: [("Authorization".to_owned(), "Bearer x".to_owned())].into(),
                        },
                        trust: Trust::None,
                        category: Some("web".into()),
                        previews: BTreeMap::new(),
                    },
                ],
                broken: vec![],
            },
        );
    }

    #[test]
    fn a_bad_entry_is_broken_and_the_others_stay() {
        let parsed = parse(
            &json!({"mcpServers": {
                "both": {"command": "a", "url": "http://b"},
                "neither": {"args": []},
                "sse": {"type": "sse", "url": "http://x/sse"},
                "ftp": {"url": "ftp://x"},
                "a__b": {"command": "a"},
                "sp ace": {"command": "a"},
                "trusting": {"command": "a", "assent": {"trust": "all"}},
                "typo": {"command": "a", "assent": {"trsut": "hints"}},
                "good": {"command": "a"}
            }})
            .to_string(),
        )
        .expect("a map");
        assert_eq!(
            parsed
                .servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["good"]
        );
        let broken: Vec<&str> = parsed.broken.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            broken,
            [
                "a__b", "both", "ftp", "neither", "sp ace", "sse", "trusting", "typo"
            ]
        );
        assert!(
            parsed.broken.iter().all(|b| !b.reason.is_empty()),
            "{parsed:?}"
        );
    }

    #[test]
    fn a_file_without_the_map_is_an_error() {
        assert!(parse("{}").is_err());
        assert!(parse("[1]").is_err());
        assert!(parse("{\"mcpServers\": []}").is_err());
    }

    #[test]
    fn namespaced_names_split_at_the_first_separator() {
        assert_eq!(namespaced("files", "write_file"), "files__write_file");
        assert_eq!(split_namespaced("files__a__b"), Some(("files", "a__b")));
        assert_eq!(split_namespaced("files_x"), None);
        assert_eq!(split_namespaced("__x"), None);
        assert_eq!(split_namespaced("x__"), None);
        // A tool whose name starts with `_` stays its server's.
        assert_eq!(namespaced("s", "_echo"), "s___echo");
        assert_eq!(split_namespaced("s___echo"), Some(("s", "_echo")));
    }

    #[test]
    fn a_server_name_that_would_split_two_ways_is_refused() {
        for bad in ["s_", "_s", "_", "a__b", "", " "] {
            assert!(server_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in ["s", "my_files", "my-files", "a_b_c", "v1.2"] {
            assert_eq!(server_name_problem(good), None, "{good:?}");
        }
        let parsed = parse(
            &json!({"mcpServers": {
                "s_": {"command": "a"},
                "_s": {"command": "a"},
                "s": {"command": "a"}
            }})
            .to_string(),
        )
        .expect("a map");
        let broken: Vec<&str> = parsed.broken.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(broken, ["_s", "s_"]);
        assert!(
            parsed
                .broken
                .iter()
                .all(|b| b.reason.contains("starts or ends with `_`")),
            "{parsed:?}"
        );
        // Every split of a namespaced name gives back the server it was made of.
        for server in ["s", "a_b", "x-y"] {
            for tool in ["_echo", "echo_", "__x", "a__b", "_"] {
                assert_eq!(
                    split_namespaced(&namespaced(server, tool)),
                    Some((server, tool)),
                    "{server} {tool}"
                );
            }
        }
    }
}
