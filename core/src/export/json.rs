//! A minimal JSON writer for the export manifest (the core has no serde).
//!
//! Invariant: the output is valid JSON: strings are escaped, objects and arrays close in order;
//! keys keep the order they were written in, so the manifest is deterministic.

use alloc::format;
use alloc::string::String;

/// A JSON string literal for `s`.
pub(crate) fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An object from `(key, raw JSON value)` pairs, on one line.
pub(crate) fn object(fields: &[(&str, String)]) -> String {
    let body: alloc::vec::Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {v}", string(k)))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// An array of raw JSON values, one per line, indented by `indent` spaces.
pub(crate) fn array(items: &[String], indent: usize) -> String {
    if items.is_empty() {
        return String::from("[]");
    }
    let pad = " ".repeat(indent + 2);
    let body: alloc::vec::Vec<String> = items.iter().map(|i| format!("{pad}{i}")).collect();
    format!("[\n{}\n{}]", body.join(",\n"), " ".repeat(indent))
}

/// `null` or the number.
pub(crate) fn opt_num(v: Option<usize>) -> String {
    v.map_or_else(|| String::from("null"), |n| format!("{n}"))
}
