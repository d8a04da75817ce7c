//! Names as C sees them: the one place where a model's input and output names (ONNX names such
//! as `input.1`, `/fc/Gemm_output_0` or the legacy exporter's `191`) become the C identifiers of
//! an exported bundle, and where the `PREFIX_INPUT_NAME_SIZE` macro names are spelled. The
//! exporter checks names with [`usable`], `picograd compile` makes them with
//! [`ExportNames::sanitized`], and the target harness finds the size macros with [`size_macro`].
//!
//! Invariant: [`ExportNames::sanitized`] returns, for any list of names, identifiers that
//! [`usable`] accepts, that differ from each other in more than ASCII case (the size macros are
//! upper case), and that depend only on the names and their order.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::ExportNames;

/// Words an identifier must not be: C99–C23 keywords, C++ keywords (the header is usable from
/// C++), `<stdint.h>` type names, and `i` (a local of the generated `model_run`).
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "alignas",
    "alignof",
    "bool",
    "constexpr",
    "false",
    "nullptr",
    "static_assert",
    "thread_local",
    "true",
    "typeof",
    "typeof_unqual",
    "asm",
    "catch",
    "class",
    "delete",
    "explicit",
    "export",
    "friend",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "operator",
    "private",
    "protected",
    "public",
    "template",
    "this",
    "throw",
    "try",
    "typeid",
    "typename",
    "using",
    "virtual",
    "NULL",
    "size_t",
    "ptrdiff_t",
    "intptr_t",
    "uintptr_t",
    "intmax_t",
    "uintmax_t",
    "i",
];

/// Prefixes no identifier may start with: the C reserved spellings, picograd's own helpers
/// (`pg_`), and `<stdint.h>` macro families (`INT32_MAX`, `UINT8_C`, `SIZE_MAX`, ...).
const RESERVED_PREFIXES: &[&str] = &[
    "__",
    "pg_",
    "harness_",
    "INT",
    "UINT",
    "SIZE_MAX",
    "PTRDIFF_",
    "WCHAR_",
    "WINT_",
    "SIG_ATOMIC_",
];

/// Is `s` an identifier the exporter can use for an input or output of a model whose symbols
/// start with `prefix`: ASCII letters, digits and `_`, not starting with a digit, no reserved
/// word or spelling (see [`RESERVED`]), and not starting with the prefix (any case).
pub fn usable(s: &str, prefix: &str) -> bool {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && !reserved(s, prefix)
}

/// Is `s` a C identifier that is no C keyword (for the prefix itself)?
pub fn is_c_identifier(s: &str) -> bool {
    usable(s, "")
}

fn reserved(s: &str, prefix: &str) -> bool {
    let b = s.as_bytes();
    let underscore_upper = b.len() > 1 && b[0] == b'_' && b[1].is_ascii_uppercase();
    let stdint_type = (s.starts_with("int") || s.starts_with("uint")) && s.ends_with("_t");
    let has_prefix = !prefix.is_empty()
        && s.len() >= prefix.len()
        && s[..prefix.len()].eq_ignore_ascii_case(prefix);
    underscore_upper
        || stdint_type
        || has_prefix
        || RESERVED.contains(&s)
        || RESERVED_PREFIXES.iter().any(|p| s.starts_with(p))
}

/// Which side of `PREFIX_run` a value is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A model input (`PREFIX_INPUT_NAME_SIZE`, `in_` in front of an unusable name).
    Input,
    /// A model output (`PREFIX_OUTPUT_NAME_SIZE`, `out_` in front of an unusable name).
    Output,
}

impl Side {
    fn word(self) -> &'static str {
        match self {
            Side::Input => "in",
            Side::Output => "out",
        }
    }
}

/// The element-count macro of input or output `ident` in a bundle whose symbols start with
/// `prefix`: `size_macro("model", Side::Output, "out_191")` is `MODEL_OUTPUT_OUT_191_SIZE`.
pub fn size_macro(prefix: &str, side: Side, ident: &str) -> String {
    let kind = match side {
        Side::Input => "INPUT",
        Side::Output => "OUTPUT",
    };
    format!(
        "{}_{kind}_{}_SIZE",
        prefix.to_ascii_uppercase(),
        ident.to_ascii_uppercase()
    )
}

/// The largest element count of input or output `ident` whose size depends on run-time
/// dimensions: `MODEL_INPUT_X_MAX_SIZE` beside the function-like `MODEL_INPUT_X_SIZE(N)`.
pub fn max_size_macro(prefix: &str, side: Side, ident: &str) -> String {
    let s = size_macro(prefix, side, ident);
    format!("{}_MAX_SIZE", s.trim_end_matches("_SIZE"))
}

/// One name made into an identifier, before making it distinct: every character other than
/// an ASCII letter, digit or `_` becomes `_`; an empty, reserved or digit-led result gets
/// `in_`/`out_` in front (`191` → `out_191`, `int` → `in_int`, `model_x` → `in_model_x`).
pub fn c_identifier(name: &str, side: Side, prefix: &str) -> String {
    let n: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if usable(&n, prefix) {
        n
    } else {
        format!("{}_{n}", side.word())
    }
}

impl ExportNames {
    /// Distinct C identifiers for a model's input and output names, in order: each name goes
    /// through [`c_identifier`]; one that is already taken (ignoring ASCII case, across inputs
    /// and outputs) gets `_2`, `_3`, ... appended, the first free one (and `in_`/`out_` in
    /// front if that made it reserved: `_` twice gives `_` and `in___2`).
    pub fn sanitized<S: AsRef<str>>(inputs: &[S], outputs: &[S], prefix: &str) -> ExportNames {
        let mut taken: Vec<String> = Vec::new();
        let mut make = |names: &[S], side: Side| -> Vec<String> {
            names
                .iter()
                .map(|n| {
                    let base = c_identifier(n.as_ref(), side, prefix);
                    let mut id = base.clone();
                    let mut k = 2usize;
                    while taken.iter().any(|t| t.eq_ignore_ascii_case(&id)) {
                        // `_` taken makes `__2`, a reserved spelling: the side word goes first.
                        id = format!("{base}_{k}");
                        if !usable(&id, prefix) {
                            id = format!("{}_{id}", side.word());
                        }
                        k += 1;
                    }
                    taken.push(id.to_ascii_lowercase());
                    id
                })
                .collect()
        };
        let inputs = make(inputs, Side::Input);
        let outputs = make(outputs, Side::Output);
        ExportNames { inputs, outputs }
    }
}

/// Checks names given to the exporter: each [`usable`], none twice (ignoring case).
pub(crate) fn check(names: &ExportNames, prefix: &str) -> core::result::Result<(), String> {
    if !is_c_identifier(prefix) {
        return Err(format!("prefix {prefix:?} is not a C identifier"));
    }
    let all: Vec<&String> = names.inputs.iter().chain(&names.outputs).collect();
    for (i, n) in all.iter().enumerate() {
        if !usable(n, prefix) {
            return Err(format!(
                "name {n:?} is not a C identifier, is reserved, or starts with the prefix \
                 {prefix:?} (ExportNames::sanitized makes usable names)"
            ));
        }
        if all[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
            return Err(format!(
                "name {n:?} is used twice (names must differ in more than case)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_names_become_distinct_identifiers() {
        let ins = [
            "input.1",
            "input_1",
            "0",
            "model_x",
            "Model.y",
            "int",
            "/fc/Gemm:0",
            "température",
            "temp:rature",
            "",
            "__x",
            "uint8_t",
            "INT8_MAX",
            "X",
            "x",
        ];
        let outs = ["191", "7", "out_191", "x"];
        let n = ExportNames::sanitized(&ins, &outs, "model");
        assert_eq!(
            n.inputs,
            [
                "input_1",
                "input_1_2",
                "in_0",
                "in_model_x",
                "in_Model_y",
                "in_int",
                "_fc_Gemm_0",
                "temp_rature",
                "temp_rature_2",
                "in_",
                "in___x",
                "in_uint8_t",
                "in_INT8_MAX",
                "X",
                "x_2",
            ]
        );
        assert_eq!(n.outputs, ["out_191", "out_7", "out_191_2", "x_3"]);
        let all: Vec<&String> = n.inputs.iter().chain(&n.outputs).collect();
        for (i, a) in all.iter().enumerate() {
            assert!(usable(a, "model"), "{a}");
            assert!(all[..i].iter().all(|b| !b.eq_ignore_ascii_case(a)), "{a}");
        }
        assert_eq!(check(&n, "model"), Ok(()));
        assert_eq!(ExportNames::sanitized(&ins, &outs, "model"), n);
    }

    proptest::proptest! {
        /// Any names at all (ASCII punctuation, digits, non-ASCII, repeats, case variants)
        /// become usable identifiers, distinct ignoring case, the same on every call.
        #[test]
        fn any_names_become_distinct_usable_identifiers(
            ins in proptest::collection::vec("[a-zA-Z0-9_./:é-]{0,6}", 0..8),
            outs in proptest::collection::vec("[a-zA-Z0-9_./:é-]{0,6}", 0..8),
        ) {
            let n = ExportNames::sanitized(&ins, &outs, "model");
            proptest::prop_assert_eq!(check(&n, "model"), Ok(()));
            proptest::prop_assert_eq!(&ExportNames::sanitized(&ins, &outs, "model"), &n);
        }
    }

    #[test]
    fn macros_and_checks_agree() {
        assert_eq!(
            size_macro("model", Side::Output, "out_191"),
            "MODEL_OUTPUT_OUT_191_SIZE"
        );
        assert!(usable("x", "model") && !usable("9x", "model") && !usable("x.y", "model"));
        assert!(!usable("modelX", "model") && !usable("i", "model"));
        let bad = ExportNames::new(&["a"], &["A"]);
        assert!(check(&bad, "model").is_err());
        assert!(check(&ExportNames::new(&["a"], &[]), "9").is_err());
    }
}
