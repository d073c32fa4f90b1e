//! A folder listing (`jsontp serve --list`) shown to a person: an aligned
//! table of name, size and modification time, folders marked with `/`.

use serde::Deserialize;

/// One entry of a listing, as the file server writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    size: u64,
    modified: Option<String>,
    #[serde(rename = "is-folder")]
    is_folder: bool,
}

/// The table for `content`, or `None` when it is not a listing (then it is
/// shown as it came).
pub fn table(content: &[u8]) -> Option<String> {
    let entries: Vec<Entry> = serde_json::from_slice(content).ok()?;
    let rows: Vec<[String; 3]> = entries
        .iter()
        .map(|entry| {
            // A line break or another control character in a name would
            // break the table: shown escaped.
            let name = if entry.name.chars().any(char::is_control) {
                entry.name.escape_debug().to_string()
            } else {
                entry.name.clone()
            };
            let name = if entry.is_folder { format!("{name}/") } else { name };
            let size = if entry.is_folder {
                "-".to_owned()
            } else {
                entry.size.to_string()
            };
            let modified = entry
                .modified
                .as_deref()
                .map_or_else(|| "-".to_owned(), readable_date);
            [name, size, modified]
        })
        .collect();
    let header = ["NAME".to_owned(), "SIZE".to_owned(), "MODIFIED (UTC)".to_owned()];
    let width = |column: usize| {
        rows.iter()
            .chain([&header])
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (name_width, size_width) = (width(0), width(1));
    let mut out = String::new();
    for [name, size, modified] in [&header].into_iter().chain(&rows) {
        out.push_str(&format!("{name:<name_width$}  {size:>size_width$}  {modified}\n"));
    }
    if rows.is_empty() {
        out.push_str("(an empty folder)\n");
    }
    Some(out)
}

/// A D16 date (`2026-11-26T04:09:05Z+0000`, as the server writes it in
/// UTC) as `2026-11-26 04:09:05`; anything else as it is.
fn readable_date(date: &str) -> String {
    match date.strip_suffix("Z+0000") {
        Some(utc) if utc.len() == 19 && utc.as_bytes()[10] == b'T' => utc.replacen('T', " ", 1),
        _ => date.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_becomes_an_aligned_table() {
        let content = br#"[{"name":"docs","size":0,"modified":"2026-11-26T04:09:05Z+0000","is-folder":true},{"name":"hello.txt","size":13,"modified":null,"is-folder":false},{"name":"big.bin","size":1048576,"modified":"2026-01-02T03:04:05Z+0000","is-folder":false}]"#;
        assert_eq!(
            table(content).expect("a listing"),
            "\
NAME          SIZE  MODIFIED (UTC)
docs/            -  2026-11-26 04:09:05
hello.txt       13  -
big.bin    1048576  2026-01-02 03:04:05
"
        );
        assert_eq!(
            table(b"[]\n").expect("an empty listing"),
            "NAME  SIZE  MODIFIED (UTC)\n(an empty folder)\n"
        );
    }

    #[test]
    fn control_characters_in_a_name_do_not_break_the_table() {
        let content = br#"[{"name":"a\nb\t.txt","size":2,"modified":null,"is-folder":false}]"#;
        assert_eq!(
            table(content).expect("a listing"),
            "NAME        SIZE  MODIFIED (UTC)\na\\nb\\t.txt     2  -\n"
        );
    }

    #[test]
    fn other_json_is_not_a_listing() {
        assert_eq!(table(b"[1, 2]"), None);
        assert_eq!(table(br#"[{"name":"a"}]"#), None);
        assert_eq!(
            table(br#"[{"name":"a","size":1,"modified":null,"is-folder":false,"x":1}]"#),
            None
        );
        assert_eq!(table(b"[not json"), None);
    }
}
