//! An exported model bundle as the target harness sees it: the `model_run` parameters and their
//! element counts read from `model.h`, the generated `inputs.h` that feeds the harness, and
//! [`Values`], a buffer of one C element type carried as exact bit patterns.
//!
//! A bundle with run-time dimensions (`int model_run(int32_t N, const float *x, float *y)`)
//! takes each dimension as an input of one integer named like it; array sizes come from the
//! function-like size macros at those values, output arrays are sized for the largest ones, and
//! the harness prints `model_run`'s status. Several feeds (sets of inputs) run in one program.
//!
//! Invariant: values travel between Rust and the device as bit patterns (C unions of the element
//! type and an unsigned integer of the same width), so no float is ever rounded through text.

use std::fmt::Write as _;
use std::path::Path;

use picograd_core::export::names::{max_size_macro, size_macro, Side};
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

/// The size of an array that depends on run-time dimensions: `#define NAME(args) body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeMacro {
    /// The macro's parameters (dimension names).
    pub args: Vec<String>,
    /// Its body, C over the parameters.
    pub body: String,
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
    /// Element count, from `MODEL_INPUT_<NAME>_SIZE` / `MODEL_OUTPUT_<NAME>_SIZE`; for an
    /// array whose size depends on run-time dimensions, the largest
    /// (`MODEL_INPUT_<NAME>_MAX_SIZE`); 1 for a dimension.
    pub size: usize,
    /// How the size follows the run-time dimensions (`None`: fixed).
    pub size_of: Option<SizeMacro>,
    /// For a run-time dimension (`int32_t N`, passed by value; `input` is true): its bounds
    /// `(MODEL_DIM_N_MIN, MODEL_DIM_N_MAX)`.
    pub dim: Option<(i64, i64)>,
}

/// What the harness needs to know of a bundle: the parameters of `model_run`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// Dimensions, inputs, then outputs, in `model_run`'s order.
    pub params: Vec<Param>,
    /// `int model_run(...)` returns a status (a bundle with run-time dimensions); `void`
    /// otherwise.
    pub returns_status: bool,
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
        // The prototype, not a mention of `model_run()` in a comment: `void model_run(`, or
        // `int model_run(` when it returns a status.
        let (start, returns_status) =
            match (text.find("void model_run("), text.find("int model_run(")) {
                (Some(v), _) => (v + "void ".len(), false),
                (None, Some(i)) => (i + "int ".len(), true),
                (None, None) => return Err(err(0, "no `void model_run(` prototype".into())),
            };
        let open = start + "model_run(".len();
        let close = text[open..]
            .find(')')
            .map(|i| open + i)
            .ok_or_else(|| err(open, "unclosed `model_run(`".into()))?;
        let mut params = Vec::new();
        let decls = &text[open..close];
        if decls.trim() != "void" {
            for decl in decls.split(',') {
                params.push(parse_param(decl, text).map_err(|d| err(open, d))?);
            }
        }
        Ok(Bundle {
            params,
            returns_status,
        })
    }

    /// The input arrays, in order.
    pub fn inputs(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.input && p.dim.is_none())
    }

    /// The run-time dimensions, in order.
    pub fn dims(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.dim.is_some())
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| !p.input)
    }

    /// The `inputs.h` the harness includes: one union (element type + same-width unsigned) per
    /// parameter, inputs `const` and filled with `inputs`' exact bits, and the two macros
    /// `HARNESS_RUN()` and `HARNESS_PRINT_OUTPUTS()`.
    pub fn inputs_header(&self, inputs: &[(&str, Values)]) -> Result<String> {
        self.feeds_header(&[inputs])
    }

    /// [`Bundle::inputs_header`] for several feeds: the first is what `HARNESS_RUN()` runs
    /// (measured); `HARNESS_MORE_FEEDS()` runs the others in order, each after a `feed K` line
    /// and with the output arrays cleared, printing their outputs (and status).
    pub fn feeds_header(&self, feeds: &[&[(&str, Values)]]) -> Result<String> {
        let mut h =
            String::from("/* inputs.h: generated by picograd-runtime's target module. */\n");
        for p in self.params.iter().filter(|p| !p.input) {
            let _ = writeln!(
                h,
                "static union {{ {} u[{}]; {} v[{}]; }} pg_out_{};",
                bits_type(p),
                p.size.max(1),
                p.ctype,
                p.size.max(1),
                p.name
            );
        }
        if self.returns_status {
            h.push_str("static volatile int pg_status;\n");
        }
        let mut calls = Vec::new();
        for (k, feed) in feeds.iter().enumerate() {
            calls.push(self.feed(&mut h, feed, k)?);
        }
        let (run, print) = calls
            .first()
            .cloned()
            .ok_or_else(|| Error::shape("model_run", "no feed given".to_string()))?;
        let _ = writeln!(h, "#define HARNESS_RUN() {run}");
        let _ = writeln!(
            h,
            "#define HARNESS_PRINT_OUTPUTS() do {{ {print} }} while (0)"
        );
        if calls.len() > 1 {
            let clear: Vec<String> = self
                .outputs()
                .map(|p| format!("memset(&pg_out_{0}, 0, sizeof(pg_out_{0}));", p.name))
                .collect();
            let more: Vec<String> = calls
                .iter()
                .enumerate()
                .skip(1)
                .map(|(k, (run, print))| {
                    format!(
                        "{} {run}; printf(\"feed {k}\\n\"); {print}",
                        clear.join(" ")
                    )
                })
                .collect();
            let _ = writeln!(
                h,
                "#define HARNESS_MORE_FEEDS() do {{ {} }} while (0)",
                more.join(" ")
            );
        }
        Ok(h)
    }

    /// Writes feed `k`'s input arrays into `h`; returns its call and its print statements.
    fn feed(
        &self,
        h: &mut String,
        inputs: &[(&str, Values)],
        k: usize,
    ) -> Result<(String, String)> {
        let dims = self.dim_values(inputs)?;
        let in_bounds = self
            .dims()
            .zip(&dims)
            .all(|(p, (_, v))| p.dim.is_some_and(|(lo, hi)| (lo..=hi).contains(v)));
        let mut args = Vec::new();
        for p in &self.params {
            if p.dim.is_some() {
                let v = dims.iter().find(|(n, _)| *n == p.name).map_or(0, |d| d.1);
                args.push(format!("{v}"));
                continue;
            }
            if !p.input {
                args.push(format!("pg_out_{}.v", p.name));
                continue;
            }
            // Out of bounds, `model_run` must refuse before reading: any length will do.
            let want = if in_bounds {
                Some(self.size_at(p, &dims)?)
            } else {
                None
            };
            let v = find_input(inputs, p, want)?;
            let var = format!("pg_in_{}_{k}", p.name);
            let n = v.len().max(1);
            let _ = write!(
                h,
                "static const union {{ {} u[{n}]; {} v[{n}]; }} {var} = {{{{",
                bits_type(p),
                p.ctype
            );
            for (i, b) in v.bits.iter().enumerate() {
                let sep = if i % 8 == 0 { "\n    " } else { " " };
                let _ = write!(h, "{sep}0x{b:x}ull,");
            }
            if v.bits.is_empty() {
                h.push_str("0u");
            }
            h.push_str("\n}};\n");
            args.push(format!("{var}.v"));
        }
        let call = format!("model_run({})", args.join(", "));
        let run = if self.returns_status {
            format!("pg_status = {call}")
        } else {
            call
        };
        let mut print = String::new();
        if self.returns_status {
            print.push_str("printf(\"status: %d\\n\", pg_status); ");
        }
        for p in self.outputs() {
            let n = if in_bounds {
                self.size_at(p, &dims)?
            } else {
                p.size
            };
            // After an error every element is printed: none may have been written.
            let count = if self.returns_status {
                format!("(pg_status == 0 ? {n}u : {}u)", p.size)
            } else {
                format!("{n}u")
            };
            let _ = write!(
                print,
                "harness_print(\"{0}\", pg_out_{0}.v, {count}, sizeof(pg_out_{0}.v[0])); ",
                p.name
            );
        }
        Ok((run, print))
    }

    /// The value given for each run-time dimension (an input of one integer, by name).
    fn dim_values<'a>(&'a self, inputs: &[(&str, Values)]) -> Result<Vec<(&'a str, i64)>> {
        self.dims()
            .map(|p| {
                let v = inputs
                    .iter()
                    .find(|(n, _)| *n == p.name)
                    .and_then(|(_, v)| v.to_i64())
                    .filter(|v| v.len() == 1)
                    .ok_or_else(|| {
                        Error::shape(
                            "model_run",
                            format!("give run-time dimension `{}` as one integer", p.name),
                        )
                    })?;
                Ok((p.name.as_str(), v[0]))
            })
            .collect()
    }

    /// The element count of array `p` at the dimensions `dims`.
    fn size_at(&self, p: &Param, dims: &[(&str, i64)]) -> Result<usize> {
        let Some(m) = &p.size_of else {
            return Ok(p.size);
        };
        let n = super::size_expr::eval(&m.body, dims).map_err(|e| {
            Error::shape(
                "model_run",
                format!("size of `{}` ({}): {e}", p.name, m.body),
            )
        })?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= p.size)
            .ok_or_else(|| {
                Error::shape(
                    "model_run",
                    format!(
                        "`{}` would hold {n} elements, above its largest {}",
                        p.name, p.size
                    ),
                )
            })
    }
}

fn bits_type(p: &Param) -> &'static str {
    match p.dtype.itemsize() {
        1 => "uint8_t",
        2 => "uint16_t",
        4 => "uint32_t",
        _ => "uint64_t",
    }
}

/// The symbol prefix of the bundles the harness builds.
const PREFIX: &str = "model";

fn find_input<'a>(
    inputs: &'a [(&str, Values)],
    p: &Param,
    want: Option<usize>,
) -> Result<&'a Values> {
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
    let size_ok = want.is_none_or(|n| v.len() == n);
    if !size_ok || v.dtype.itemsize() != p.dtype.itemsize() {
        return Err(Error::shape(
            "model_run",
            format!(
                "input `{}` wants {} × {}, got {} × {}",
                p.name,
                want.unwrap_or(v.len()),
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
    if !decl.contains('*') {
        return dim_param(ident, dtype, ctype, header);
    }
    // Inputs are `const` pointers, outputs are not (the exporter's convention). The size macro
    // is spelled from the parameter's name by the exporter's own rule; hand-written bundles may
    // instead name `in_x` and define `MODEL_INPUT_X_SIZE`, so the name without its
    // `in_`/`out_` is tried second.
    let input = rest.contains(&"const");
    let side = if input { Side::Input } else { Side::Output };
    let short = ident.strip_prefix(if input { "in_" } else { "out_" });
    let sized = |n: &str| {
        let fixed = define_value(header, &size_macro(PREFIX, side, n)).map(|s| (s, None));
        fixed.or_else(|| {
            let m = define_fn(header, &size_macro(PREFIX, side, n))?;
            Some((
                define_value(header, &max_size_macro(PREFIX, side, n))?,
                Some(m),
            ))
        })
    };
    let (name, (size, size_of)) = std::iter::once(ident)
        .chain(short)
        .find_map(|n| sized(n).map(|s| (n, s)))
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
        size_of,
        dim: None,
    })
}

/// `int32_t N` → a run-time dimension, its bounds from `MODEL_DIM_N_MIN` / `MODEL_DIM_N_MAX`.
fn dim_param(
    ident: &str,
    dtype: DType,
    ctype: String,
    header: &str,
) -> std::result::Result<Param, String> {
    let up = ident.to_ascii_uppercase();
    let bound = |what: &str| {
        let name = format!("{}_DIM_{up}_{what}", PREFIX.to_ascii_uppercase());
        define_value(header, &name)
            .ok_or_else(|| format!("no numeric `#define {name}` for dimension `{ident}`"))
    };
    if !dtype.is_int() {
        return Err(format!("dimension `{ident}` is {ctype}, not an integer"));
    }
    Ok(Param {
        name: ident.to_owned(),
        input: true,
        dtype,
        ctype,
        size: 1,
        size_of: None,
        dim: Some((bound("MIN")? as i64, bound("MAX")? as i64)),
    })
}

/// `#define NAME(A, B) body` → its parameters and body.
fn define_fn(header: &str, name: &str) -> Option<SizeMacro> {
    header.lines().find_map(|line| {
        let rest = line.strip_prefix("#define ")?.trim_start();
        let rest = rest.strip_prefix(name)?.strip_prefix('(')?;
        let (args, body) = rest.split_once(')')?;
        Some(SizeMacro {
            args: args.split(',').map(|a| a.trim().to_owned()).collect(),
            body: body.trim().to_owned(),
        })
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
        assert!(h.contains("#define HARNESS_RUN() model_run(pg_in_x_0.v, pg_out_y.v, pg_out_idx.v, pg_out_out_191.v)"));
        assert!(b.inputs_header(&[("x", Values::f32(&[1.0]))]).is_err());
        assert!(b.inputs_header(&[]).is_err());
    }

    const SYM: &str = "#define MODEL_DIM_N_MIN 1\n#define MODEL_DIM_N_MAX 4\n\
        #define MODEL_INPUT_X_SIZE(N) ((N)*2)\n#define MODEL_INPUT_X_MAX_SIZE 8\n\
        #define MODEL_OUTPUT_Y_SIZE 3\n\
        int model_run(int32_t N, const float *x, float *y);\n";

    #[test]
    fn run_time_dimensions_size_the_arrays() {
        let b = Bundle::parse(SYM, "model.h").unwrap();
        assert!(b.returns_status);
        assert_eq!(b.dims().next().and_then(|p| p.dim), Some((1, 4)));
        assert_eq!(b.inputs().map(|p| p.size).collect::<Vec<_>>(), [8]);
        let n = |v: i32| ("N", Values::i32(&[v]));
        let x3 = ("x", Values::f32(&[0.5; 6]));
        let h = b
            .feeds_header(&[&[n(3), x3.clone()], &[n(9), x3.clone()]])
            .unwrap();
        assert!(
            h.contains("#define HARNESS_RUN() pg_status = model_run(3, pg_in_x_0.v, pg_out_y.v)"),
            "{h}"
        );
        assert!(
            h.contains("pg_status = model_run(9, pg_in_x_1.v, pg_out_y.v); printf(\"feed 1\\n\");"),
            "{h}"
        );
        // In bounds the length must be the size at N; out of bounds any length is passed on.
        assert!(b.inputs_header(&[n(2), x3.clone()]).is_err());
        assert!(b.inputs_header(&[x3]).is_err());
    }

    #[test]
    fn values_convert() {
        assert_eq!(Values::i32(&[-3, 7]).to_i64(), Some(vec![-3, 7]));
        assert_eq!(Values::f32(&[1.5]).to_f32(), Some(vec![1.5]));
        assert_eq!(Values::f32(&[1.5]).to_i64(), None);
    }
}
