//! An int8 conv over an input padded with a non-zero value (a quantized conv's input padded
//! with its zero point, so that it multiplies the stored 8-bit values as they are): the
//! pad-with-value select fuses into the conv's reads (`schedule/widen.rs`) when the view reading
//! it has no mask and its source is a reduce's output; it is realized (a padded copy) when its
//! source is elementwise, and when the reading view has a mask (a select is not
//! zero-preserving). All give a naive loop's values; odd sizes throughout.

use picograd_core::realize::count_work;
use picograd_core::schedule::schedule;
use picograd_core::{ConvOpts, DType, Tensor};

const CI: usize = 3;
const CO: usize = 5;
const H: usize = 5;
const W: usize = 7;
const K: usize = 3;
/// The pad value (an input zero point), and the padding (top, bottom), (left, right).
const ZP: i8 = -37;
const PAD: [(usize, usize); 2] = [(1, 2), (2, 1)];

fn bytes(n: usize, seed: u32) -> Vec<i8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8 as i8
        })
        .collect()
}

/// The int8 input as an unrealized intermediate computed by elementwise ops alone (a wrapping
/// product of two buffers; not an op a widening chain holds).
fn elementwise_input() -> (Tensor, Vec<i8>) {
    let (a, b) = (bytes(CI * H * W, 1), bytes(CI * H * W, 2));
    let prod: Vec<i8> = a.iter().zip(&b).map(|(x, y)| x.wrapping_mul(*y)).collect();
    let t = Tensor::from_slice(&a, &[1, CI, H, W])
        .try_mul(Tensor::from_slice(&b, &[1, CI, H, W]))
        .unwrap();
    (t, prod)
}

/// The int8 input as the output of a reduce (pairs summed, wrapped to int8), as a previous
/// conv's requantized output is.
fn reduced_input() -> (Tensor, Vec<i8>) {
    let a = bytes(CI * H * W * 2, 4);
    let sum: Vec<i8> = a
        .chunks(2)
        .map(|p| (i32::from(p[0]) + i32::from(p[1])) as i8)
        .collect();
    let t = Tensor::from_slice(&a, &[1, CI, H, W, 2])
        .cast(DType::I32)
        .try_sum(&[-1], false)
        .unwrap()
        .cast(DType::I8);
    (t, sum)
}

/// Naive conv of `x` (`[CI, h, w]`) padded with `ZP` by `PAD` and then with 0 by `outer` on
/// every side, stride 1, i32 sums plus `bias`.
fn naive(x: &[i8], w: &[i8], bias: &[i32], outer: usize) -> Vec<i32> {
    let (hp, wp) = (H + PAD[0].0 + PAD[0].1, W + PAD[1].0 + PAD[1].1);
    let at = |c: usize, y: i64, xx: i64| -> i32 {
        let (y, xx) = (y - outer as i64, xx - outer as i64);
        if y < 0 || xx < 0 || y >= hp as i64 || xx >= wp as i64 {
            return 0;
        }
        let (y, xx) = (y - PAD[0].0 as i64, xx - PAD[1].0 as i64);
        if y < 0 || xx < 0 || y >= H as i64 || xx >= W as i64 {
            return i32::from(ZP);
        }
        i32::from(x[c * H * W + y as usize * W + xx as usize])
    };
    let (oh, ow) = (hp + 2 * outer - K + 1, wp + 2 * outer - K + 1);
    let mut out = Vec::new();
    for o in 0..CO {
        for y in 0..oh {
            for xx in 0..ow {
                let mut s = bias[o];
                for c in 0..CI {
                    for ky in 0..K {
                        for kx in 0..K {
                            let wv = i32::from(w[((o * CI + c) * K + ky) * K + kx]);
                            s += wv * at(c, (y + ky) as i64, (xx + kx) as i64);
                        }
                    }
                }
                out.push(s);
            }
        }
    }
    out
}

fn conv((x, xs): (Tensor, Vec<i8>), outer: usize) -> (Tensor, Vec<i32>) {
    let w = bytes(CO * CI * K * K, 3);
    let bias: Vec<i32> = (0..CO as i32).map(|c| c * 1001 - 2000).collect();
    let padded = x
        .try_pad_value(&[(0, 0), (0, 0), PAD[0], PAD[1]], f64::from(ZP))
        .unwrap();
    assert_eq!(padded.dtype(), DType::I8);
    let y = padded
        .try_conv2d_int(
            &Tensor::from_slice(&w, &[CO, CI, K, K]),
            Some(&Tensor::from_slice(&bias, &[CO])),
            &ConvOpts::default().padding(outer),
        )
        .unwrap();
    (y, naive(&xs, &w, &bias, outer))
}

fn kernels(y: &Tensor) -> u64 {
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    count_work(&items).unwrap().kernels
}

#[test]
fn pad_value_select_fuses_into_an_unpadded_conv() {
    let (y, want) = conv(reduced_input(), 0);
    // The input's reduce and the conv: no kernel for the padded copy.
    assert_eq!(kernels(&y), 2);
    assert_eq!(y.to_vec::<i32>().unwrap(), want);
}

#[test]
fn pad_value_select_of_an_elementwise_input_is_a_padded_copy() {
    let (y, want) = conv(elementwise_input(), 0);
    // The input (realized: the copy reads it through its padding), the padded copy the conv
    // reads unmasked, the conv.
    assert_eq!(kernels(&y), 3);
    assert_eq!(y.to_vec::<i32>().unwrap(), want);
}

#[test]
fn pad_value_select_read_through_padding_is_realized() {
    let (y, want) = conv(reduced_input(), 1);
    // Read through the conv's own padding mask the select would give ZP, not 0, outside its
    // input: it is realized (the reduce, the padded copy, the conv).
    assert_eq!(kernels(&y), 3);
    assert_eq!(y.to_vec::<i32>().unwrap(), want);
}
