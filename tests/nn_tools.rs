//! The library's training tools against plain references: `nn::Sequential` computes what its
//! layers compute one after another and round-trips through a state dict; `nn::Dataset` batches
//! hold exactly the rows asked for (in order, or a seeded permutation; the last partial batch
//! kept or dropped); `nn::fit` tells its progress hook once per step, in order; a `Jit` step may
//! own its optimizer and return errors.

use picograd::jit::Jit;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{self, state, Adam, Dataset, FitOptions, Last, Linear, Module, Optimizer};
use picograd::nn::{Order, Progress, Sequential};
use picograd::{DType, Tensor};

#[test]
fn sequential_is_its_layers_in_order_and_round_trips_its_state() {
    picograd::init();
    let (a, b) = (Linear::new(3, 5, true, 1), Linear::new(5, 2, false, 2));
    let x = Tensor::randn(&[4, 3], 9);
    let want = b.forward(&a.forward(&x).relu()).to_vec::<f32>().unwrap();
    let (wa, ba, wb) = (a.weight.clone(), a.bias.clone(), b.weight.clone());
    let seq = Sequential::new().push(a).push_fn(|x| Ok(x.relu())).push(b);
    assert_eq!(seq.len(), 3);
    assert!(seq.module(1).is_none() && seq.module(2).is_some());
    assert_eq!(seq.forward(&x).to_vec::<f32>().unwrap(), want);
    let names: Vec<String> = seq.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "2.weight"]);
    // A fresh Sequential of the same layers loads the state and computes the same.
    let blob = state::save_blob(&nn::state_dict(&seq.parameters())).unwrap();
    let other = Sequential::new()
        .push(Linear::new(3, 5, true, 50))
        .push_fn(|x| Ok(x.relu()))
        .push(Linear::new(5, 2, false, 51));
    assert_ne!(other.forward(&x).to_vec::<f32>().unwrap(), want);
    state::load_state_dict(&other.parameters(), &state::load_blob(&blob).unwrap()).unwrap();
    assert_eq!(other.forward(&x).to_vec::<f32>().unwrap(), want);
    let params = other.parameters();
    for (t, orig) in params
        .iter()
        .map(|(_, t)| t)
        .zip([&wa, ba.as_ref().unwrap(), &wb])
    {
        assert_eq!(t.to_vec::<f32>().unwrap(), orig.to_vec::<f32>().unwrap());
    }
}

/// The row ids of every batch (column 1 holds each row's id).
fn batch_ids(data: &Dataset, size: usize, order: Order, last: Last) -> Vec<Vec<i32>> {
    data.batches(size, order, last)
        .map(|b| {
            let b = b.unwrap();
            let ids = b[1].to_vec::<i32>().unwrap();
            // Column 0 holds 10·id, 10·id + 1 in each row.
            let xs = b[0].to_vec::<f32>().unwrap();
            let want: Vec<f32> = ids
                .iter()
                .flat_map(|&i| [10.0 * i as f32, 10.0 * i as f32 + 1.0])
                .collect();
            assert_eq!(xs, want, "rows travel together");
            assert_eq!(b[0].shape(), vec![ids.len(), 2]);
            ids
        })
        .collect()
}

#[test]
fn batches_hold_the_rows_asked_for() {
    picograd::init();
    let n = 11;
    let xs: Vec<f32> = (0..n)
        .flat_map(|i| [10.0 * i as f32, 10.0 * i as f32 + 1.0])
        .collect();
    let ids: Vec<i32> = (0..n).collect();
    let data = Dataset::new(&[
        &Tensor::from_slice(&xs, &[n as usize, 2]),
        &Tensor::from_slice(&ids, &[n as usize]),
    ])
    .unwrap();
    assert_eq!(data.len(), 11);
    let in_order = batch_ids(&data, 4, Order::InOrder, Last::Keep);
    assert_eq!(
        in_order,
        [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 10]]
    );
    let dropped = batch_ids(&data, 4, Order::InOrder, Last::Drop);
    assert_eq!(dropped, [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(data.batch_count(4, Last::Keep), 3);
    assert_eq!(data.batch_count(4, Last::Drop), 2);
    // Shuffled: a permutation of all rows, the same for the same seed, another for another.
    let s1 = batch_ids(&data, 4, Order::Shuffled { seed: 3 }, Last::Keep);
    let mut all: Vec<i32> = s1.concat();
    assert_ne!(all, ids, "shuffled");
    all.sort();
    assert_eq!(all, ids, "every row once");
    assert_eq!(
        s1,
        batch_ids(&data, 4, Order::Shuffled { seed: 3 }, Last::Keep)
    );
    assert_ne!(
        s1,
        batch_ids(&data, 4, Order::Shuffled { seed: 4 }, Last::Keep)
    );
    let d = batch_ids(&data, 4, Order::Shuffled { seed: 3 }, Last::Drop);
    assert_eq!(
        d.concat(),
        s1.concat()[..8].to_vec(),
        "drop cuts the leftover rows"
    );
    let short = Tensor::from_slice(&[1i32, 2], &[2]);
    let e = Dataset::new(&[&Tensor::ones(&[3, 1], DType::F32), &short])
        .err()
        .unwrap();
    assert!(e.to_string().contains("3 rows"), "{e}");
}

#[test]
fn fit_tells_the_hook_every_step_and_a_jit_step_owns_its_optimizer() {
    picograd::init();
    // y = 2x - 1 by least squares on 12 points, batches of 5 (the last has 2).
    let xs: Vec<f32> = (0..12).map(|i| i as f32 / 6.0 - 1.0).collect();
    let ys: Vec<f32> = xs.iter().map(|x| 2.0 * x - 1.0).collect();
    let data = Dataset::new(&[
        &Tensor::from_slice(&xs, &[12, 1]),
        &Tensor::from_slice(&ys, &[12, 1]),
    ])
    .unwrap();
    let model = Linear::new(1, 1, true, 3);
    let params = model.parameters().into_iter().map(|(_, t)| t).collect();
    let mut opt = Adam::new(params, AdamConfig::adam(0.1)).unwrap();
    let mut seen: Vec<Progress> = Vec::new();
    let opts = FitOptions {
        batch_size: 5,
        epochs: 30,
        order: Order::Shuffled { seed: 5 },
        last: Last::Keep,
    };
    let means = nn::fit(
        &data,
        &opts,
        |b| {
            opt.zero_grad();
            let d = model.try_forward(&b[0])?.try_sub(&b[1])?;
            let loss = d.mul(&d).mean_all();
            loss.backward()?;
            opt.step()?;
            Ok(loss)
        },
        &mut |p| seen.push(*p),
    )
    .unwrap();
    assert_eq!(seen.len(), 30 * 3);
    for (k, p) in seen.iter().enumerate() {
        assert_eq!(
            (p.epoch, p.batch, p.epochs, p.batches),
            (k / 3, k % 3, 30, 3)
        );
    }
    let last = &seen[seen.len() - 1];
    assert!((last.mean_loss - means[29]).abs() < 1e-6);
    assert!(means[29] < means[0] * 0.05, "{means:?}");
    // An error inside a step ends the loop and comes out.
    let e = nn::fit(&data, &opts, |b| b[0].try_reshape(&[7]), &mut |_| {}).err();
    assert!(e.unwrap().to_string().contains("reshape"));

    // A JIT step that owns its optimizer (FnMut, no RefCell) and returns Result.
    let mut opt = Adam::new(vec![model.weight.clone()], AdamConfig::adam(0.01)).unwrap();
    let step = Jit::new(move |io: &[Tensor]| {
        opt.zero_grad();
        let d = model.try_forward(&io[0])?.try_sub(&io[1])?;
        let loss = d.mul(&d).mean_all();
        loss.backward()?;
        let mut outs = vec![loss.clone()];
        outs.extend(opt.schedule_step(&[&loss])?);
        Ok(outs)
    });
    for b in data.batches(4, Order::InOrder, Last::Drop) {
        let b = b.unwrap();
        assert!(step.call(&b).unwrap()[0].item::<f32>().unwrap().is_finite());
    }
    assert_eq!(step.replays(), 2);
}
