//! Writes the exported files from a capture and its memory plan: `PREFIX.h`, `PREFIX.c`, the
//! weights (`PREFIX_weights.c` or `weights.bin`) and `PREFIX.json`.
//!
//! Invariants: every C symbol starts with the prefix; each distinct kernel is one `static`
//! function, renamed `PREFIX_kN_NAME` (N = position in the run of the first step running it), that
//! every step running an identical kernel (same UOps, same aliasing) calls with its own buffers and
//! offsets — so two different kernels never share a name and identical ones are written once (an
//! unrolled RNN's steps share their functions and flash does not grow with the steps); every buffer
//! is a typed, 16-byte aligned array or a pointer into one; the model files include only
//! `<stdint.h>` (and `<math.h>` when freestanding math is off).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::dims::{macro_body, numel, Dim};
use super::names::{self, Side};
use super::plan::{BufferPlan, Home, MemoryPlan, Role};
use super::weights::{blob, initializer, BLOB_HEADER};
use super::{json, Bundle, ExportNames, ExportOptions, Weights};
use crate::codegen::c::{render_program_aliased, CRenderOpts};
use crate::codegen::uops::LinearKernel;
use crate::error::Result;
use crate::jit::Capture;
use crate::lazy::fmt_shape;
use crate::symbolic::is_internal_var;

/// Everything the writers share.
struct Ctx<'a> {
    capture: &'a Capture,
    names: &'a ExportNames,
    opts: &'a ExportOptions,
    plan: &'a MemoryPlan,
    /// `model`, `MODEL`.
    p: &'a str,
    up: String,
    /// The renamed kernel of each running step (`None` for a copy); steps sharing a function
    /// hold the same name.
    kernels: Vec<Option<LinearKernel>>,
    /// The running steps whose kernel is written into `PREFIX.c`: the first of each function.
    defining: Vec<usize>,
    /// Weight slots, in slot order, with their bytes.
    weights: Vec<(usize, Vec<u8>)>,
    /// The run-time dimensions (empty: a fixed-shape model, `PREFIX_run` returns nothing).
    dims: Vec<Dim>,
}

pub(crate) fn emit(
    capture: &Capture,
    names: &ExportNames,
    opts: &ExportOptions,
    plan: MemoryPlan,
    dims: Vec<Dim>,
) -> Result<Bundle> {
    let ctx = Ctx::new(capture, names, opts, &plan, dims)?;
    let p = &opts.prefix;
    let (weights_file, blob_offsets) = ctx.weights_file();
    let mut files = Vec::new();
    files.push((format!("{p}.h"), ctx.header().into_bytes()));
    files.push((format!("{p}.c"), ctx.source(&blob_offsets)?.into_bytes()));
    files.push(weights_file);
    let names_list: Vec<String> = files.iter().map(|f| f.0.clone()).collect();
    let manifest = ctx.manifest(&blob_offsets, &names_list);
    files.push((format!("{p}.json"), manifest.clone().into_bytes()));
    let weight_bytes = ctx.weights.iter().map(|w| w.1.len()).sum();
    let dims = ctx.dims.clone();
    drop(ctx);
    Ok(Bundle {
        files,
        manifest_json: manifest,
        arena_bytes: plan.arena_bytes,
        lower_bound_bytes: plan.lower_bound_bytes,
        plan,
        weight_bytes,
        dims,
    })
}

/// `float` → `f32`, `int32_t` → `i32`, `uint8_t` → `u8`, `double` → `f64`.
fn ctype_tag(ctype: &str) -> String {
    match ctype {
        "float" => String::from("f32"),
        "double" => String::from("f64"),
        c => c
            .trim_end_matches("_t")
            .replacen("uint", "u", 1)
            .replacen("int", "i", 1),
    }
}

impl<'a> Ctx<'a> {
    fn new(
        capture: &'a Capture,
        names: &'a ExportNames,
        opts: &'a ExportOptions,
        plan: &'a MemoryPlan,
        dims: Vec<Dim>,
    ) -> Result<Self> {
        let p = opts.prefix.as_str();
        // (kernel without its name, aliased) → the shared function's name. The aliasing flag is
        // in the key because it changes the signature (`restrict` or not).
        let mut functions: HashMap<(LinearKernel, bool), String> = HashMap::new();
        let mut defining = Vec::new();
        let mut kernels = Vec::with_capacity(plan.steps.len());
        for (n, s) in plan.steps.iter().enumerate() {
            let Some(mut k) = capture.steps()[s.step].kernel.clone() else {
                kernels.push(None);
                continue;
            };
            let name = core::mem::take(&mut k.name);
            let key = (k, s.in_place.is_some());
            let shared = match functions.get(&key) {
                Some(shared) => shared.clone(),
                None => {
                    let shared = format!("{p}_k{n}_{name}");
                    functions.insert(key.clone(), shared.clone());
                    defining.push(n);
                    shared
                }
            };
            let mut k = key.0;
            k.name = shared;
            kernels.push(Some(k));
        }
        let mut weights = Vec::new();
        for b in plan.buffers.iter().filter(|b| b.role == Role::Weight) {
            weights.push((b.slot, capture.slots()[b.slot].to_bytes()?));
        }
        Ok(Ctx {
            capture,
            names,
            opts,
            plan,
            p,
            up: p.to_ascii_uppercase(),
            kernels,
            defining,
            weights,
            dims,
        })
    }

    fn buf(&self, slot: usize) -> &BufferPlan {
        &self.plan.buffers[slot]
    }

    fn arena_symbol(&self, arena: usize) -> String {
        format!(
            "{}_arena_{}",
            self.p,
            ctype_tag(self.plan.arenas[arena].ctype)
        )
    }

    /// The C expression for a slot's first element.
    fn expr(&self, slot: usize) -> String {
        let b = self.buf(slot);
        match (b.home, b.role) {
            (Home::Caller, Role::Input(i)) => self.names.inputs[i].clone(),
            (Home::Caller, Role::Output(o)) => self.names.outputs[o].clone(),
            (Home::Arena { arena, offset }, _) => format!(
                "({} + {})",
                self.arena_symbol(arena),
                offset / b.dtype.itemsize()
            ),
            _ => format!("{}_w{slot}", self.p),
        }
    }

    /// `(name, slot, is_output)` for every input then every output.
    fn io(&self) -> Vec<(&'a str, usize, bool)> {
        let ins = self.capture.input_slots().into_iter();
        let outs = self.capture.output_slots().into_iter();
        let names = self.names;
        ins.zip(names.inputs.iter())
            .map(|(s, n)| (n.as_str(), s, false))
            .chain(
                outs.zip(names.outputs.iter())
                    .map(|(s, n)| (n.as_str(), s, true)),
            )
            .collect()
    }

    // ---- model.h ----

    fn header(&self) -> String {
        let (p, up) = (self.p, &self.up);
        let mut h =
            format!("/**\n * @file {p}.h\n * The C API of a model exported by picograd.\n *\n");
        h.push_str(&self.header_usage());
        h.push_str(&format!(
            " */\n#ifndef {up}_H\n#define {up}_H\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n"
        ));
        h.push_str(&self.size_macros());
        h.push_str(&self.prototypes());
        h.push_str("\n#ifdef __cplusplus\n}\n#endif\n\n");
        h.push_str(&format!("#endif /* {up}_H */\n"));
        h
    }

    fn header_usage(&self) -> String {
        let mut u = String::new();
        if self.opts.weights == Weights::Blob {
            u.push_str(&format!(
                " * Call {p}_load_weights() once with the contents of weights.bin before the\n \
                 * first {p}_run(); it returns 0 on success, -1 for a wrong length, -2 for a bad\n \
                 * header, -3 for a checksum mismatch.\n",
                p = self.p
            ));
        }
        if self.opts.io_in_arena {
            u.push_str(&format!(
                " * Inputs and outputs live in the model's static arena: write each input through\n \
                 * {p}_input_NAME(), call {p}_run(), read each output through {p}_output_NAME().\n \
                 * An output stays valid until the next {p}_run().\n",
                p = self.p
            ));
        } else {
            u.push_str(&format!(
                " * {p}_run() reads each input array and writes each output array (caller memory,\n \
                 * NAME_SIZE elements each, element type as in the prototype; f16/bf16 are\n \
                 * uint16_t bit patterns). Arrays must not overlap.\n",
                p = self.p
            ));
        }
        u.push_str(
            " * The model uses static memory only (not reentrant), no heap and no I/O; the\n \
             * same inputs always give the same outputs.\n",
        );
        if !self.dims.is_empty() {
            u.push_str(&self.dims_usage());
        }
        for note in &self.opts.header_notes {
            u.push_str(" *\n");
            for line in wrap(note, 92) {
                // A note must not end the comment early.
                u.push_str(&format!(" * {}\n", line.replace("*/", "* /")));
            }
        }
        if self.opts.fused_mulacc {
            // clang (not gcc) treats the builtin as a libm call while errno matters.
            u.push_str(
                " * Multiply-accumulates use __builtin_fmaf (one rounding): build for an FPU with\n \
                 * fused multiply-add, with clang add -fno-math-errno, or it calls libm's fmaf.\n",
            );
        }
        u
    }

    fn size_macros(&self) -> String {
        let mut m = self.dim_macros();
        for (name, slot, is_out) in self.io() {
            let b = self.buf(slot);
            let side = if is_out { Side::Output } else { Side::Input };
            let shapes = if is_out {
                self.capture.output_shapes()
            } else {
                self.capture.input_shapes()
            };
            let n = self.io_index(slot, is_out);
            let shape: Vec<_> = shapes[n].iter().map(|d| d.unbind()).collect();
            let size = names::size_macro(self.p, side, name);
            let what = if is_out { "Output" } else { "Input" };
            let count = numel(&shape);
            if count.is_const() {
                m.push_str(&format!(
                    "/** {what} `{name}`: {}, shape {}. */\n#define {size} {}\n",
                    b.dtype,
                    fmt_shape(&shape),
                    b.elements
                ));
                continue;
            }
            let args: Vec<String> = count
                .vars()
                .iter()
                .filter_map(|v| v.var_name().map(String::from))
                .collect();
            m.push_str(&format!(
                "/** {what} `{name}`: {}, shape {}: {size}({}) elements, at most {}. */\n\
                 #define {size}({}) {}\n#define {} {}\n",
                b.dtype,
                fmt_shape(&shape),
                args.join(", "),
                names::max_size_macro(self.p, side, name),
                args.join(", "),
                macro_body(&count),
                names::max_size_macro(self.p, side, name),
                b.elements
            ));
        }
        m.push_str(&format!(
            "/** Bytes of static RAM the arena takes (lower bound {}). */\n#define {}_ARENA_BYTES {}\n",
            self.plan.lower_bound_bytes, self.up, self.plan.arena_bytes
        ));
        let wb: usize = self.weights.iter().map(|w| w.1.len()).sum();
        m.push_str(&format!(
            "/** Bytes of weights. */\n#define {}_WEIGHTS_BYTES {wb}\n",
            self.up
        ));
        if self.opts.weights == Weights::Blob {
            let len = blob(&self.weight_payloads()).0.len();
            m.push_str(&format!(
                "/** Length of weights.bin. */\n#define {}_WEIGHTS_BLOB_BYTES {len}u\n",
                self.up
            ));
        }
        m
    }

    fn io_index(&self, slot: usize, is_out: bool) -> usize {
        match self.buf(slot).role {
            Role::Input(i) if !is_out => i,
            Role::Output(o) if is_out => o,
            _ => 0,
        }
    }

    fn prototypes(&self) -> String {
        let p = self.p;
        let mut s = String::from("\n");
        if self.opts.weights == Weights::Blob {
            s.push_str(&format!(
                "/** Copies weights.bin into the model; 0 on success. */\nint {p}_load_weights(const uint8_t *blob, uint32_t len);\n"
            ));
        }
        if self.opts.io_in_arena {
            for (name, slot, is_out) in self.io() {
                let (c, kind) = if is_out {
                    ("const ", "output")
                } else {
                    ("", "input")
                };
                let t = self.buf(slot).dtype.c_storage();
                s.push_str(&format!(
                    "/** Where {kind} `{name}` lives. */\n{c}{t} *{p}_{kind}_{name}(void);\n"
                ));
            }
        }
        s.push_str(&format!(
            "/** Runs the model. */\n{};\n",
            self.run_signature()
        ));
        s
    }

    /// `void PREFIX_run(inputs, outputs)` for a fixed-shape model; with run-time dimensions
    /// `int PREFIX_run(int32_t DIM, ..., inputs, outputs)`, returning a status.
    fn run_signature(&self) -> String {
        let mut params: Vec<String> = self
            .dims
            .iter()
            .map(|d| format!("int32_t {}", d.name))
            .collect();
        if !self.opts.io_in_arena {
            params.extend(self.io().into_iter().map(|(name, slot, is_out)| {
                let c = if is_out { "" } else { "const " };
                format!("{c}{} *{name}", self.buf(slot).dtype.c_storage())
            }));
        }
        let params = if params.is_empty() {
            String::from("void")
        } else {
            params.join(", ")
        };
        let ret = if self.dims.is_empty() { "void" } else { "int" };
        format!("{ret} {}_run({params})", self.p)
    }

    /// What `PREFIX.h` says of the run-time dimensions.
    fn dims_usage(&self) -> String {
        let (p, up) = (self.p, &self.up);
        let list: Vec<String> = self
            .dims
            .iter()
            .map(|d| format!("{} in [{}, {}]", d.name, d.min, d.max))
            .collect();
        let mut u = format!(
            " *\n * Run-time dimensions: {}. {p}_run() takes them first, then the arrays; an\n \
             * array holds its SIZE(...) macro's elements at those values. {p}_run() returns\n \
             * {up}_OK, or {up}_ERR_DIM when a dimension is outside its bounds: then it reads\n \
             * and writes nothing. The static arena is sized for the largest dimensions and\n \
             * serves every value in bounds; kernel indices are 32-bit where the bounds allow.\n",
            list.join(", ")
        );
        if self.opts.io_in_arena {
            u.push_str(&format!(
                " * Inputs and outputs in the arena are laid out for the largest dimensions: an\n \
                 * array starts where {p}_input_NAME() / {p}_output_NAME() say whatever the values.\n"
            ));
        }
        u
    }

    /// `PREFIX_DIM_NAME_MIN/MAX` and the status codes, for a model with run-time dimensions.
    fn dim_macros(&self) -> String {
        let up = &self.up;
        let mut m = String::new();
        for d in &self.dims {
            let n = d.name.to_ascii_uppercase();
            m.push_str(&format!(
                "/** Run-time dimension `{}`: {up}_DIM_{n}_MIN <= {} <= {up}_DIM_{n}_MAX. */\n\
                 #define {up}_DIM_{n}_MIN {}\n#define {up}_DIM_{n}_MAX {}\n",
                d.name, d.name, d.min, d.max
            ));
        }
        if !self.dims.is_empty() {
            m.push_str(&format!(
                "/** {p}_run() succeeded. */\n#define {up}_OK 0\n\
                 /** A dimension passed to {p}_run() is outside its bounds; nothing was read or written. */\n\
                 #define {up}_ERR_DIM (-1)\n",
                p = self.p
            ));
        }
        m
    }

    // ---- model.c ----

    fn source(&self, blob_offsets: &[usize]) -> Result<String> {
        let p = self.p;
        let mut c = format!(
            "/* {p}.c: generated by picograd (kernels, memory plan, {p}_run). Do not edit. */\n#include \"{p}.h\"\n"
        );
        c.push_str(&self.kernels_c()?);
        c.push_str(&self.storage_c());
        if self.opts.weights == Weights::Blob {
            c.push_str(&self.loader_c(blob_offsets));
        }
        c.push_str(&self.run_c());
        Ok(c)
    }

    fn kernels_c(&self) -> Result<String> {
        let opts = CRenderOpts {
            libm: !self.opts.freestanding_math,
            entry_wrapper: false,
            freestanding_math: self.opts.freestanding_math,
            static_kernels: true,
            ..CRenderOpts::default()
        };
        let ks: Vec<(&LinearKernel, bool)> = self
            .defining
            .iter()
            .filter_map(|&n| {
                let aliased = self.plan.steps[n].in_place.is_some();
                self.kernels[n].as_ref().map(|k| (k, aliased))
            })
            .collect();
        render_program_aliased(&ks, &opts)
    }

    /// Weight declarations and the arenas.
    fn storage_c(&self) -> String {
        let mut c = String::from("\n");
        for (slot, _) in &self.weights {
            let b = self.buf(*slot);
            let (t, n) = (b.dtype.c_storage(), b.elements.max(1));
            let sym = self.expr(*slot);
            c.push_str(&match self.opts.weights {
                Weights::ConstArrays => format!("extern const {t} {sym}[{n}];\n"),
                Weights::Blob => {
                    format!("static {t} {sym}[{n}] __attribute__((aligned(16)));\n")
                }
            });
        }
        for (a, arena) in self.plan.arenas.iter().enumerate() {
            let n = arena.bytes / crate_itemsize(arena.ctype);
            c.push_str(&format!(
                "/* {} bytes; lower bound {} */\nstatic {} {}[{n}] __attribute__((aligned(16)));\n",
                arena.bytes,
                arena.lower_bound_bytes,
                arena.ctype,
                self.arena_symbol(a)
            ));
        }
        if self.opts.io_in_arena {
            c.push_str(&self.accessors_c());
        }
        c
    }

    fn accessors_c(&self) -> String {
        let mut c = String::new();
        for (name, slot, is_out) in self.io() {
            let (k, kind) = if is_out {
                ("const ", "output")
            } else {
                ("", "input")
            };
            let t = self.buf(slot).dtype.c_storage();
            c.push_str(&format!(
                "\n{k}{t} *{p}_{kind}_{name}(void) {{\n  return {};\n}}\n",
                self.expr(slot),
                p = self.p
            ));
        }
        c
    }

    fn loader_c(&self, offsets: &[usize]) -> String {
        let (p, up) = (self.p, &self.up);
        let mut c = format!("{LOADER_HELPERS}\nint {p}_load_weights(const uint8_t *blob, uint32_t len) {{\n  uint32_t h = 2166136261u, i;\n  if (blob == 0 || len != {up}_WEIGHTS_BLOB_BYTES) return -1;\n  if (blob[0] != 'P' || blob[1] != 'G' || blob[2] != 'W' || blob[3] != '1') return -2;\n");
        c.push_str(&format!(
            "  if (pg_read_u32(blob + 4) != {}u || pg_read_u32(blob + 8) != len - {BLOB_HEADER}u) return -2;\n",
            self.weights.len()
        ));
        c.push_str(&format!("  for (i = {BLOB_HEADER}u; i < len; i++) {{\n    h ^= blob[i];\n    h *= 16777619u;\n  }}\n  if (h != pg_read_u32(blob + 12)) return -3;\n"));
        for ((slot, _), off) in self.weights.iter().zip(offsets) {
            let b = self.buf(*slot);
            c.push_str(&format!(
                "  pg_load_le((uint8_t *){}, blob + {}u, {}u, {}u);\n",
                self.expr(*slot),
                BLOB_HEADER + off,
                b.elements,
                b.dtype.itemsize()
            ));
        }
        c.push_str("  return 0;\n}\n");
        c
    }

    fn run_c(&self) -> String {
        let mut c = format!("\n{} {{\n", self.run_signature());
        for d in &self.dims {
            let n = d.name.to_ascii_uppercase();
            c.push_str(&format!(
                "  if ({} < {up}_DIM_{n}_MIN || {} > {up}_DIM_{n}_MAX) return {up}_ERR_DIM;\n",
                d.name,
                d.name,
                up = self.up
            ));
        }
        for (name, slot, _) in self.io() {
            if self.buf(slot).home == Home::Caller && !self.touched(slot) {
                c.push_str(&format!("  (void){name};\n"));
            }
        }
        for (n, s) in self.plan.steps.iter().enumerate() {
            let slots = &self.capture.steps()[s.step].slots;
            let mut args: Vec<String> = slots.iter().map(|&x| self.expr(x)).collect();
            c.push_str(&match &self.kernels[n] {
                Some(k) => {
                    // The kernel's variables are `PREFIX_run`'s parameters of the same names,
                    // except internal ones (a load's offset): those are the step's constants.
                    let recorded = &self.capture.steps()[s.step].var_vals;
                    for (v, _, _) in &k.vars {
                        args.push(match recorded.iter().find(|(n, _)| n == v) {
                            Some((_, val)) if is_internal_var(v) => format!("{val}"),
                            _ => v.to_string(),
                        });
                    }
                    format!("  {}({});\n", k.name, args.join(", "))
                }
                None => format!(
                    "  {{\n    uint32_t i;\n    for (i = 0u; i < {}u; i++) {}[i] = {}[i];\n  }}\n",
                    self.buf(slots[0]).elements,
                    args[0],
                    args[1]
                ),
            });
        }
        if !self.dims.is_empty() {
            c.push_str(&format!("  return {}_OK;\n", self.up));
        }
        c.push_str("}\n");
        c
    }

    fn touched(&self, slot: usize) -> bool {
        let steps = self.capture.steps();
        self.plan
            .steps
            .iter()
            .any(|s| steps[s.step].slots.contains(&slot))
    }

    // ---- weights and manifest ----

    fn weight_payloads(&self) -> Vec<Vec<u8>> {
        self.weights.iter().map(|w| w.1.clone()).collect()
    }

    /// The weights file, and each weight's blob payload offset (empty for const arrays).
    fn weights_file(&self) -> ((String, Vec<u8>), Vec<usize>) {
        if self.opts.weights == Weights::Blob {
            let (bytes, offsets) = blob(&self.weight_payloads());
            return ((String::from("weights.bin"), bytes), offsets);
        }
        let p = self.p;
        let mut c = format!(
            "/* {p}_weights.c: generated by picograd. Weights as const arrays (they stay in flash). */\n#include <stdint.h>\n"
        );
        if self.weights.is_empty() {
            c.push_str(&format!("typedef int {p}_no_weights;\n"));
        }
        for (slot, bytes) in &self.weights {
            let b = self.buf(*slot);
            let (t, n, sym) = (b.dtype.c_storage(), b.elements.max(1), self.expr(*slot));
            let body = if bytes.is_empty() {
                String::from("  0")
            } else {
                initializer(b.dtype, bytes)
            };
            c.push_str(&format!(
                "\nextern const {t} {sym}[{n}];\nconst {t} {sym}[{n}] __attribute__((aligned(16))) = {{\n{body}\n}};\n"
            ));
        }
        ((format!("{p}_weights.c"), c.into_bytes()), Vec::new())
    }

    fn manifest(&self, blob_offsets: &[usize], files: &[String]) -> String {
        let o = self.opts;
        let mode = match o.weights {
            Weights::ConstArrays => "const_arrays",
            Weights::Blob => "blob",
        };
        let file_list: Vec<String> = files.iter().map(|f| json::string(f)).collect();
        let mut fields = alloc::vec![
            ("format", json::string("picograd-export-1")),
            ("prefix", json::string(self.p)),
            ("io_in_arena", format!("{}", o.io_in_arena)),
            ("weights", json::string(mode)),
            ("freestanding_math", format!("{}", o.freestanding_math)),
            ("fused_mulacc", format!("{}", o.fused_mulacc)),
            ("arena_bytes", format!("{}", self.plan.arena_bytes)),
            (
                "lower_bound_bytes",
                format!("{}", self.plan.lower_bound_bytes),
            ),
            ("files", format!("[{}]", file_list.join(", "))),
            ("arenas", json::array(&self.arenas_json(), 2)),
            ("buffers", json::array(&self.buffers_json(blob_offsets), 2)),
            ("kernels", json::array(&self.kernels_json(), 2)),
            ("folded_steps", format!("{:?}", self.plan.folded)),
        ];
        if !self.dims.is_empty() {
            // A fixed-shape manifest stays as it was; run-time dimensions add their bounds.
            fields.insert(8, ("dims", json::array(&self.dims_json(), 2)));
            fields.insert(9, ("run_returns_status", String::from("true")));
        }
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("  {}: {v}", json::string(k)))
            .collect();
        format!("{{\n{}\n}}\n", body.join(",\n"))
    }

    fn dims_json(&self) -> Vec<String> {
        let dims = self.dims.iter();
        dims.map(|d| {
            json::object(&[
                ("name", json::string(&d.name)),
                ("min", format!("{}", d.min)),
                ("max", format!("{}", d.max)),
            ])
        })
        .collect()
    }

    fn arenas_json(&self) -> Vec<String> {
        let arenas = self.plan.arenas.iter().enumerate();
        arenas
            .map(|(a, ar)| {
                json::object(&[
                    ("symbol", json::string(&self.arena_symbol(a))),
                    ("ctype", json::string(ar.ctype)),
                    ("bytes", format!("{}", ar.bytes)),
                    ("lower_bound_bytes", format!("{}", ar.lower_bound_bytes)),
                ])
            })
            .collect()
    }

    fn buffers_json(&self, blob_offsets: &[usize]) -> Vec<String> {
        let used = self.plan.buffers.iter().filter(|b| b.role != Role::Unused);
        used.map(|b| {
            let (role, name) = match b.role {
                Role::Input(i) => ("input", json::string(&self.names.inputs[i])),
                Role::Output(o) => ("output", json::string(&self.names.outputs[o])),
                Role::Weight => ("weight", String::from("null")),
                _ => ("intermediate", String::from("null")),
            };
            let (arena, offset) = match b.home {
                Home::Arena { arena, offset } => (Some(arena), Some(offset)),
                _ => (None, None),
            };
            let w = self.weights.iter().position(|w| w.0 == b.slot);
            let mut fields = alloc::vec![
                ("slot", format!("{}", b.slot)),
                ("role", json::string(role)),
                ("name", name),
                ("dtype", json::string(b.dtype.name())),
                ("elements", format!("{}", b.elements)),
                ("bytes", format!("{}", b.bytes)),
                ("symbol", json::string(&self.expr(b.slot))),
                ("arena", json::opt_num(arena)),
                ("offset", json::opt_num(offset)),
                (
                    "blob_offset",
                    json::opt_num(w.and_then(|w| blob_offsets.get(w).map(|o| o + BLOB_HEADER))),
                ),
            ];
            if !self.dims.is_empty() {
                // `elements` is the count at the largest dimensions; the shape says how it
                // varies.
                if let Some(shape) = self.io_shape(b) {
                    fields.insert(5, ("shape", json::string(&shape)));
                }
            }
            json::object(&fields)
        })
        .collect()
    }

    /// The unbound shape of an input or output buffer, as text.
    fn io_shape(&self, b: &BufferPlan) -> Option<String> {
        let shape = match b.role {
            Role::Input(i) => self.capture.input_shapes()[i],
            Role::Output(o) => self.capture.output_shapes()[o],
            _ => return None,
        };
        let unbound: Vec<_> = shape.iter().map(|d| d.unbind()).collect();
        Some(fmt_shape(&unbound))
    }

    fn kernels_json(&self) -> Vec<String> {
        let steps = self.plan.steps.iter().enumerate();
        steps
            .map(|(n, s)| {
                let st = &self.capture.steps()[s.step];
                let (name, src) = match (&self.kernels[n], &st.kernel) {
                    (Some(k), Some(orig)) => (k.name.clone(), orig.name.clone()),
                    _ => (String::from("copy"), String::from("copy")),
                };
                json::object(&[
                    ("step", format!("{}", s.step)),
                    ("name", json::string(&name)),
                    ("source_name", json::string(&src)),
                    ("buffers", format!("{:?}", st.slots)),
                    ("in_place_of", json::opt_num(s.in_place)),
                ])
            })
            .collect()
    }
}

/// Size of a C storage type.
fn crate_itemsize(ctype: &str) -> usize {
    match ctype {
        "double" | "int64_t" | "uint64_t" => 8,
        "float" | "int32_t" | "uint32_t" => 4,
        "int16_t" | "uint16_t" => 2,
        _ => 1,
    }
}

const LOADER_HELPERS: &str = "
static __attribute__((unused)) uint32_t pg_read_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Copies n little-endian elements of size bytes into dst, in the target's byte order. */
static __attribute__((unused)) void pg_load_le(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t size) {
  const uint16_t probe = 1u;
  const int big = *(const uint8_t *)&probe == 0u;
  uint32_t i, b;
  for (i = 0u; i < n; i++) {
    for (b = 0u; b < size; b++) dst[i * size + b] = src[i * size + (big ? size - 1u - b : b)];
  }
}
";

/// `text` split into lines of at most `width` characters at spaces (a longer word stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(core::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
