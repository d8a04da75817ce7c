//! An exported model bundle as the target harness sees it: the `model_run` parameters and their
//! element counts read from `model.h`, the generated `inputs.h` that feeds the harness, and
//! [`Values`], a buffer of one C element type carried as exact bit patterns.
//!
//! Invariant: values travel between Rust and the device as bit patterns (C unions of the element
//! type and an unsigned integer of the same width), so no float is ever rounded through text.

use std::fmt::Write as _;
use std::path::Path;

use picograd_core::export::names::{size_macro, Side};
use picograd_core::{DType, Error, Result};

/// A buffer of one element type, as exact bit patterns (zero-extended to 64 bits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Values {
    /// The element type.
    pub dtype: DType,
    /// One bit pattern per element.
    pub bits: Vec<u64>,
}

impl Values {
    /// f32 values.
    pub fn f32(v: &[f32]) -> Values {
        Values {
            dtype: DType::F32,
            bits: v.iter().map(|x| u64::from(x.to_bits())).collect(),
        }
    }

    /// i32 values.
    pub fn i32(v: &[i32]) -> Values {
        Values {
            dtype: DType::I32,
            bits: v.iter().map(|&x| u64::from(x as u32)).collect(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// The values as f32, when they are f32.
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        (self.dtype == DType::F32).then(|| {
            self.bits
                .iter()
                .map(|&b| f32::from_bits(b as u32))
                .collect()
        })
    }

    /// The values as i64, when they are integers (sign-extended from their width).
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        if !self.dtype.is_int() {
            return None;
        }
        let shift = 64 - 8 * self.dtype.itemsize() as u32;
        Some(
            self.bits
                .iter()
                .map(|&b| {
                    if self.dtype.is_unsigned() {
                        b as i64
                    } else {
                        ((b << shift) as i64) >> shift
                    }
                })
                .collect(),
        )
    }
}

/// One parameter of `model_run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The name without its `in_`/`out_` prefix (`x` for `in_x`).
    pub name: String,
    /// True for an input (`const T *in_name`), false for an output.
    pub input: bool,
    /// The element type.
    pub dtype: DType,
    /// The C type as written in `model.h`.
    pub ctype: String,
    /// Element count, from `MODEL_INPUT_<NAME>_SIZE` / `MODEL_OUTPUT_<NAME>_SIZE`.
    pub size: usize,
}

/// What the harness needs to know of a bundle: the parameters of `model_run`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// Inputs then outputs, in `model_run`'s order.
    pub params: Vec<Param>,
}

impl Bundle {
    /// Reads `model.h` in `dir`.
    pub fn read(dir: &Path) -> Result<Bundle> {
        let path = dir.join("model.h");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses the text of a `model.h`; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Bundle> {
        let err = |offset: usize, detail: String| Error::Format {
            file: file.to_owned(),
            offset: offset as u64,
            detail,
        };
        // The prototype, not a mention of `model_run()` in a comment: `void model_run(`.
        let start = text
            .find("void model_run(")
            .ok_or_else(|| err(0, "no `void model_run(` prototype".into()))?;
        let open = start + "void model_run(".len();
        let close = text[open..]
            .find(')')
            .map(|i| open + i)
            .ok_or_else(|| err(open, "unclosed `model_run(`".into()))?;
        let mut params = Vec::new();
        for decl in text[open..close].split(',') {
            params.push(parse_param(decl, text).map_err(|d| err(open, d))?);
        }
        Ok(Bundle { params })
    }

    /// The inputs, in order.
    pub fn inputs(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.input)
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| !p.input)
    }

    /// The `inputs.h` the harness includes: one union (element type + same-width unsigned) per
    /// parameter, inputs `const` and filled with `inputs`' exact bits, and the two macros
    /// `HARNESS_RUN()` and `HARNESS_PRINT_OUTPUTS()`.
    pub fn inputs_header(&self, inputs: &[(&str, Values)]) -> Result<String> {
        let mut h =
            String::from("/* inputs.h: generated by picograd-runtime's target module. */\n");
        let mut args = Vec::new();
        let mut prints = Vec::new();
        for p in &self.params {
            let bits_ty = match p.dtype.itemsize() {
                1 => "uint8_t",
                2 => "uint16_t",
                4 => "uint32_t",
                _ => "uint64_t",
            };
            let var = format!("pg_{}_{}", if p.input { "in" } else { "out" }, p.name);
            let size = param_size_macro(p);
            if p.input {
                let v = find_input(inputs, p)?;
                let _ = write!(
                    h,
                    "static const union {{ {bits_ty} u[{size}]; {} v[{size}]; }} {var} = {{{{",
                    p.ctype
                );
                for (i, b) in v.bits.iter().enumerate() {
                    let sep = if i % 8 == 0 { "\n    " } else { " " };
                    let _ = write!(h, "{sep}0x{b:x}ull,");
                }
                h.push_str("\n}};\n");
            } else {
                let _ = writeln!(
                    h,
                    "static union {{ {bits_ty} u[{size}]; {} v[{size}]; }} {var};",
                    p.ctype
                );
                prints.push(format!(
                    "harness_print(\"{}\", {var}.v, {size}, sizeof({var}.v[0]));",
                    p.name
                ));
            }
            args.push(format!("{var}.v"));
        }
        let _ = writeln!(h, "#define HARNESS_RUN() model_run({})", args.join(", "));
        let _ = writeln!(
            h,
            "#define HARNESS_PRINT_OUTPUTS() do {{ {} }} while (0)",
            prints.join(" ")
        );
        Ok(h)
    }
}

/// The symbol prefix of the bundles the harness builds.
const PREFIX: &str = "model";

fn param_size_macro(p: &Param) -> String {
    let side = if p.input { Side::Input } else { Side::Output };
    size_macro(PREFIX, side, &p.name)
}

fn find_input<'a>(inputs: &'a [(&str, Values)], p: &Param) -> Result<&'a Values> {
    let v = inputs
        .iter()
        .find(|(n, _)| *n == p.name)
        .map(|(_, v)| v)
        .ok_or_else(|| {
            Error::shape(
                "model_run",
                format!("no value given for input `{}`", p.name),
            )
        })?;
    if v.len() != p.size || v.dtype.itemsize() != p.dtype.itemsize() {
        return Err(Error::shape(
            "model_run",
            format!(
                "input `{}` wants {} × {}, got {} × {}",
                p.name,
                p.size,
                p.ctype,
                v.len(),
                v.dtype.name()
            ),
        ));
    }
    Ok(v)
}

/// `const float *in_x` → Param; the size comes from the matching `#define` in `header`.
fn parse_param(decl: &str, header: &str) -> std::result::Result<Param, String> {
    let words: Vec<&str> = decl
        .split(|c: char| c.is_whitespace() || c == '*')
        .filter(|w| !w.is_empty())
        .collect();
    let (&ident, rest) = words
        .split_last()
        .ok_or_else(|| format!("empty parameter in `{decl}`"))?;
    let ctype = rest
        .iter()
        .filter(|w| **w != "const" && **w != "restrict")
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let dtype =
        dtype_of(&ctype).ok_or_else(|| format!("parameter `{ident}`: unknown C type `{ctype}`"))?;
    // Inputs are `const` pointers, outputs are not (the exporter's convention). The size macro
    // is spelled from the parameter's name by the exporter's own rule; hand-written bundles may
    // instead name `in_x` and define `MODEL_INPUT_X_SIZE`, so the name without its
    // `in_`/`out_` is tried second.
    let input = rest.contains(&"const");
    let side = if input { Side::Input } else { Side::Output };
    let short = ident.strip_prefix(if input { "in_" } else { "out_" });
    let (name, size) = std::iter::once(ident)
        .chain(short)
        .find_map(|n| define_value(header, &size_macro(PREFIX, side, n)).map(|s| (n, s)))
        .ok_or_else(|| {
            format!(
                "no numeric `#define {}` for parameter `{ident}`",
                size_macro(PREFIX, side, ident)
            )
        })?;
    Ok(Param {
        name: name.to_owned(),
        input,
        dtype,
        ctype,
        size,
    })
}

fn dtype_of(ctype: &str) -> Option<DType> {
    Some(match ctype {
        "float" => DType::F32,
        "double" => DType::F64,
        "int8_t" => DType::I8,
        "uint8_t" => DType::U8,
        "int16_t" => DType::I16,
        "uint16_t" => DType::U16,
        "int32_t" => DType::I32,
        "uint32_t" => DType::U32,
        "int64_t" => DType::I64,
        "uint64_t" => DType::U64,
        _ => return None,
    })
}

/// The value of `#define NAME 123` (parentheses and `u`/`l` suffixes allowed).
fn define_value(header: &str, name: &str) -> Option<usize> {
    header.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next() != Some("#define") || words.next() != Some(name) {
            return None;
        }
        let v: String = words.collect::<String>();
        v.trim_matches(|c| c == '(' || c == ')')
            .trim_end_matches(['u', 'U', 'l', 'L'])
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#include <stdint.h>\n#define MODEL_INPUT_X_SIZE 8\n\
        #define MODEL_OUTPUT_Y_SIZE (4u)\n#define MODEL_OUTPUT_IDX_SIZE 1\n\
        #define MODEL_OUTPUT_OUT_191_SIZE 2\n\
        void model_run(const float *in_x, float *out_y, int32_t *out_idx, float *out_191);\n";

    #[test]
    fn parses_model_run() {
        let b = Bundle::parse(HEADER, "model.h").unwrap();
        let names: Vec<_> = b
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.input, p.size))
            .collect();
        assert_eq!(
            names,
            [
                ("x", true, 8),
                ("y", false, 4),
                ("idx", false, 1),
                ("out_191", false, 2)
            ]
        );
        assert_eq!(b.params[2].dtype, DType::I32);
    }

    #[test]
    fn header_carries_exact_bits() {
        let b = Bundle::parse(HEADER, "model.h").unwrap();
        let x = Values::f32(&[1.0, -0.5, 0.1, 0.0, -0.0, 3.0, 4.0, 5.0]);
        let h = b.inputs_header(&[("x", x)]).unwrap();
        assert!(
            h.contains("0x3f800000ull, 0xbf000000ull, 0x3dcccccdull"),
            "{h}"
        );
        assert!(h.contains("#define HARNESS_RUN() model_run(pg_in_x.v, pg_out_y.v, pg_out_idx.v, pg_out_out_191.v)"));
        assert!(b.inputs_header(&[("x", Values::f32(&[1.0]))]).is_err());
        assert!(b.inputs_header(&[]).is_err());
    }

    #[test]
    fn values_convert() {
        assert_eq!(Values::i32(&[-3, 7]).to_i64(), Some(vec![-3, 7]));
        assert_eq!(Values::f32(&[1.5]).to_f32(), Some(vec![1.5]));
        assert_eq!(Values::f32(&[1.5]).to_i64(), None);
    }
}
