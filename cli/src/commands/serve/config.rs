//! `jsontp serve --config FILE`: the settings in a TOML file, keyed by the
//! long option names (`root = "/srv"`, `max-upload = "2G"`,
//! `language = ["en-US", "fr"]`), below the environment and the command
//! line. Each value of the file is checked by its option's own clap value
//! parser and becomes that option's default, then the command line is
//! parsed again: the environment and the flags win over the file, and
//! every rule about a value is written once, in its option.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use clap::builder::ArgAction;
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command, FromArgMatches};
use toml::de::{DeTable, DeValue};

use super::args::{ServeArgs, TOKEN_ENV};

/// Options the file cannot hold: they say which file to read and what to
/// do with it.
const NOT_IN_FILE: [&str; 2] = ["config", "check-config"];

/// Where `jsontp serve`'s settings come from: its command line, the
/// environment and, with `--config`, a file; read again as a whole on a
/// reload.
#[derive(Debug, Clone)]
pub struct Source {
    /// The arguments after `jsontp serve`.
    argv: Vec<OsString>,
    file: Option<PathBuf>,
}

impl Source {
    /// This process's command line, and `file`.
    pub fn of_process(file: Option<PathBuf>) -> Source {
        // `jsontp serve ARGS`: the command takes no option before `serve`.
        Source {
            argv: std::env::args_os().skip(2).collect(),
            file,
        }
    }

    /// The configuration file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

/// Where the token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// No token: writes, if `--writable`, are open to anyone who can connect.
    None,
    /// `--token`, `JSONTP_TOKEN` or the file's `token`.
    Given(String),
    /// The first line of this file.
    File(PathBuf),
}

/// `jsontp serve`'s settings as parsed: the arguments, the one place the
/// token comes from, and each option's value as written (to tell which
/// ones a reload changes).
///
/// The token may be given on the command line, in `JSONTP_TOKEN` or in a
/// file; two of them at once are a usage error rather than one silently
/// winning, since the operator meant one of them and would not learn which
/// one the server took. The configuration file's `token` or `token-file`
/// is below all of them, as its other values are.
#[derive(Debug)]
pub struct Settings {
    pub args: ServeArgs,
    pub token: TokenSource,
    written: BTreeMap<String, Vec<OsString>>,
}

impl Settings {
    /// The settings `matches` hold.
    pub fn from_matches(matches: &ArgMatches) -> Result<Settings, clap::Error> {
        let args = ServeArgs::from_arg_matches(matches)?;
        let given = |id: &str| {
            matches!(
                matches.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        // Clap keeps the command line's `--token` over `JSONTP_TOKEN`
        // silently; both are counted here.
        let mut sources = Vec::new();
        if matches.value_source("token") == Some(ValueSource::CommandLine) {
            sources.push("--token");
        }
        if std::env::var_os(TOKEN_ENV).is_some() {
            sources.push(TOKEN_ENV);
        }
        match matches.value_source("token_file") {
            Some(ValueSource::CommandLine) => sources.push("--token-file"),
            Some(ValueSource::EnvVariable) => sources.push("JSONTP_TOKEN_FILE"),
            _ => {}
        }
        if sources.len() > 1 {
            let message = format!(
                "the token is given {} ways ({}); give it one way only",
                sources.len(),
                sources.join(", ")
            );
            // Formatted here, so that the usage shown is `jsontp serve`'s.
            return Err(
                clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, message)
                    .format(&mut serve_command()),
            );
        }
        // What the command line or the environment gives wins over the
        // file's `token` or `token-file` (defaults here).
        let token = match (&args.token, &args.token_file) {
            (Some(token), _) if given("token") => TokenSource::Given(token.clone()),
            (_, Some(file)) if given("token_file") => TokenSource::File(file.clone()),
            (Some(token), _) => TokenSource::Given(token.clone()),
            (None, Some(file)) => TokenSource::File(file.clone()),
            (None, None) => TokenSource::None,
        };
        let command = serve_command();
        let written = command
            .get_arguments()
            .filter_map(|arg| {
                let long = arg.get_long()?;
                let values = matches.get_raw(arg.get_id().as_str())?;
                Some((long.to_owned(), values.map(OsStr::to_owned).collect()))
            })
            .collect();
        Ok(Settings { args, token, written })
    }

    /// The options (long names) whose values differ between `self` and
    /// `other`, as written.
    pub fn changed(&self, other: &Settings) -> Vec<String> {
        let keys: std::collections::BTreeSet<&String> =
            self.written.keys().chain(other.written.keys()).collect();
        keys.into_iter()
            .filter(|key| self.written.get(*key) != other.written.get(*key))
            .cloned()
            .collect()
    }
}

/// `jsontp serve`'s arguments as a command of their own.
fn serve_command() -> Command {
    <ServeArgs as clap::Args>::augment_args(Command::new("serve").bin_name("jsontp serve"))
}

/// Reads the settings from `source`: the file (if any) below the
/// environment and the command line. The error is one line, naming the
/// file, the key and the line where the file is at fault.
pub fn read(source: &Source) -> Result<Settings, String> {
    let mut command = serve_command();
    if let Some(file) = &source.file {
        for (id, values) in file_defaults(file, &command)? {
            command = command.mut_arg(id, |arg| arg.default_values(values));
        }
    }
    let matches = command
        .try_get_matches_from(std::iter::once(OsString::from("serve")).chain(source.argv.iter().cloned()))
        .map_err(|e| one_line(&e))?;
    Settings::from_matches(&matches).map_err(|e| one_line(&e))
}

/// A clap error without its `error:` prefix, usage and help hint.
fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let first = text.split("\n\n").next().unwrap_or(&text);
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The file's values, each checked by its option's value parser: `(the
/// option's id, its values as written)`.
fn file_defaults(file: &Path, command: &Command) -> Result<Vec<(String, Vec<String>)>, String> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {name}: {e}"))?;
    let line = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let table = DeTable::parse(&text).map_err(|e| {
        let at = e
            .span()
            .map_or(String::new(), |span| format!(":{}", line(span.start)));
        format!("{name}{at}: not valid TOML: {}", e.message().trim())
    })?;
    let mut defaults = Vec::new();
    let mut token_key: Option<(&str, usize)> = None;
    for (key, value) in table.get_ref() {
        let (key, at) = (key.get_ref().as_ref(), line(key.span().start));
        let here = |what: String| format!("{name}:{at}: {key}: {what}");
        if NOT_IN_FILE.contains(&key) {
            return Err(here(
                "set on the command line or in the environment only, not in the file".into(),
            ));
        }
        let Some(arg) = command
            .get_arguments()
            .find(|arg| arg.get_long() == Some(key) && !NOT_IN_FILE.contains(&key))
        else {
            let hint = nearest(key, command).map_or(String::new(), |near| format!("; did you mean {near}?"));
            return Err(format!("{name}:{at}: unknown key {key}{hint}"));
        };
        // D14's one token source: the file says it one way too.
        if matches!(key, "token" | "token-file") {
            if let Some((first, first_at)) = token_key {
                return Err(here(format!(
                    "the token is also given by {first} on line {first_at}; give it one way only"
                )));
            }
            token_key = Some((key, at));
        }
        let values = texts(arg, value.get_ref()).map_err(here)?;
        check(arg, &values).map_err(here)?;
        defaults.push((arg.get_id().as_str().to_owned(), values));
    }
    Ok(defaults)
}

/// Checks `values` with `arg`'s own value parser: `arg` alone in a
/// command of its own, read from no variable, given them as a command line
/// would.
fn check(arg: &Arg, values: &[String]) -> Result<(), String> {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        // A TOML boolean: nothing more to check.
        return Ok(());
    }
    let long = arg.get_long().unwrap_or_default();
    let alone = Command::new("serve")
        .no_binary_name(true)
        .arg(arg.clone().env(None).default_values(Vec::<&str>::new()));
    let argv = values.iter().map(|value| format!("--{long}={value}"));
    alone
        .try_get_matches_from(argv)
        .map(drop)
        .map_err(|e| one_line(&e))
}

/// A TOML value as the texts the option's parser takes: a boolean for a
/// flag, a string or a number for a value, an array of them for a list.
fn texts(arg: &Arg, value: &DeValue<'_>) -> Result<Vec<String>, String> {
    let flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let list = arg.get_value_delimiter();
    let one = |value: &DeValue<'_>| match value {
        DeValue::Boolean(_) => Err("expected a string or a number, not true or false".to_owned()),
        DeValue::String(text) => Ok(text.to_string()),
        DeValue::Integer(number) => i128::from_str_radix(number.as_str(), number.radix())
            .map(|n| n.to_string())
            .map_err(|_| "the number is too large".to_owned()),
        DeValue::Float(number) => Ok(number.as_str().to_owned()),
        DeValue::Datetime(_) => Err("expected a string or a number, not a date".to_owned()),
        DeValue::Array(_) => Err("expected one value, not an array".to_owned()),
        DeValue::Table(_) => Err("expected a value, not a table".to_owned()),
    };
    match (value, flag, list) {
        (DeValue::Boolean(on), true, _) => Ok(vec![on.to_string()]),
        (_, true, _) => Err("expected true or false".to_owned()),
        (DeValue::Array(items), false, Some(_)) => items.iter().map(|item| one(item.get_ref())).collect(),
        (DeValue::String(text), false, Some(delimiter)) => {
            Ok(text.split(delimiter).map(str::to_owned).collect())
        }
        _ => one(value).map(|text| vec![text]),
    }
}

/// The key of `command` nearest to `key` (at most a third of it off, or
/// the same but for `_` written for `-`), as `--name`-less text.
fn nearest(key: &str, command: &Command) -> Option<String> {
    let key = key.replace('_', "-").to_ascii_lowercase();
    command
        .get_arguments()
        .filter_map(Arg::get_long)
        .filter(|long| !NOT_IN_FILE.contains(long))
        .map(|long| (edit_distance(&key, long), long))
        .filter(|(distance, long)| *distance <= long.len().max(3) / 3)
        .min()
        .map(|(_, long)| long.to_owned())
}

/// Levenshtein's distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_key_is_suggested() {
        let command = serve_command();
        assert_eq!(nearest("max_upload", &command).as_deref(), Some("max-upload"));
        assert_eq!(nearest("writeable", &command).as_deref(), Some("writable"));
        assert_eq!(nearest("lists", &command).as_deref(), Some("list"));
        assert_eq!(nearest("colour", &command), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
