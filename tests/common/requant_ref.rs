//! The requantize step's definition over exact integers, the reference the integer-kernel tests
//! check `Requant` against on every device: `|a|` and the product rounded to 24 significant bits
//! (onnxruntime's f32 arithmetic), then to the nearest integer, ties to even, with the zero point
//! inside the tie.
//!
//! Invariant: no floating point here — every rounding is done on `i128`s.

#![allow(dead_code)]

/// The integer nearest to `p / 2^s`, ties to even, by comparing candidate distances.
pub fn nearest(p: i128, s: u32) -> i128 {
    let d = 1i128 << s;
    let t = p / d; // truncated: the answer is t-1, t or t+1
    let mut best = t - 1;
    for c in [t, t + 1] {
        let (eb, ec) = ((p - best * d).abs(), (p - c * d).abs());
        if ec < eb || (ec == eb && c % 2 == 0) {
            best = c;
        }
    }
    best
}

/// `v ≥ 0` rounded to 24 significant bits (an f32 significand), half to even.
pub fn round24(v: i128) -> i128 {
    let bits = 128 - v.leading_zeros();
    if bits <= 24 {
        return v;
    }
    let k = bits - 24;
    nearest(v, k) << k
}

/// `round(a * m / 2^s + z)` as `Requant` defines it (the shift clamped to `[1, 62]`, the result
/// wrapped to i32).
pub fn reference_requant_z(a: i32, m: i32, s: i32, z: i32) -> i32 {
    let s = s.clamp(1, 62) as u32;
    let mag = round24(round24(i128::from(a).abs()) * i128::from(m).abs());
    let p = if (a < 0) != (m < 0) { -mag } else { mag };
    nearest(p + (i128::from(z) << s), s) as u32 as i32
}
