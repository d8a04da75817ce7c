//! The ONNX reference for the low-bit storage types (`core/tests/data/lowbit_reference.txt`,
//! written by `scripts/lowbit-reference.py` from the onnx package's `numpy_helper.to_array` and
//! its reference evaluator's `Cast`): every code's value, and casts of probe values — every
//! representable value, the midpoints between neighbours and the floats just beside them,
//! zeros, infinities, NaN, values out of range — with and without saturation. Included by
//! `#[path]` in the tests that check picograd's conversions against it.

#![allow(dead_code)]

use picograd_core::lowbit::{E8M0Round, LowBit, ALL_LOWBITS};

/// One format's reference: decoded codes, and (input, output) pairs per saturate flag.
pub struct Reference {
    pub kind: LowBit,
    pub decoded: Vec<f32>,
    pub casts: [Vec<(f32, f32)>; 2],
}

fn kind_named(name: &str) -> LowBit {
    *ALL_LOWBITS
        .iter()
        .find(|k| format!("{k:?}") == name)
        .unwrap_or_else(|| panic!("unknown format {name} in the reference"))
}

fn f(hex: &str) -> f32 {
    f32::from_bits(u32::from_str_radix(hex, 16).expect("hex bits"))
}

/// Every format's reference, in [`ALL_LOWBITS`] order.
pub fn load() -> Vec<Reference> {
    let text = include_str!("../data/lowbit_reference.txt");
    let mut out: Vec<Reference> = ALL_LOWBITS
        .iter()
        .map(|&kind| Reference {
            kind,
            decoded: Vec::new(),
            casts: [Vec::new(), Vec::new()],
        })
        .collect();
    for line in text.lines() {
        let p: Vec<&str> = line.split(' ').collect();
        if p[0] == "e8m0" {
            continue;
        }
        let k = kind_named(p[1]);
        let r = out.iter_mut().find(|r| r.kind == k).expect("format");
        match p[0] {
            "dec" => r.decoded.push(f(p[3])),
            "cast" => r.casts[(p[2] == "1") as usize].push((f(p[3]), f(p[4]))),
            "e8m0" => {}
            other => panic!("unknown row kind {other}"),
        }
    }
    out
}

/// Equal bit patterns, any NaN equal to any NaN.
pub fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// float8 e8m0 casts under every `round_mode`: (mode, saturate, input, output).
pub fn load_e8m0() -> Vec<(E8M0Round, bool, f32, f32)> {
    let text = include_str!("../data/lowbit_reference.txt");
    text.lines()
        .filter(|l| l.starts_with("e8m0 "))
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            let mode = match p[1] {
                "up" => E8M0Round::Up,
                "nearest" => E8M0Round::Nearest,
                "down" => E8M0Round::Down,
                other => panic!("unknown round_mode {other}"),
            };
            (mode, p[2] == "1", f(p[3]), f(p[4]))
        })
        .collect()
}
